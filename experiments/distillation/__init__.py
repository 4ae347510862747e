"""A distilled long-input Linformer against its teacher (compute.py, then render.py)."""
