"""The small-scale quality study: Linformer against RoBERTa at one budget (see README.md)."""
