"""All-MiniLM-L6-v2 converted to Linformer with no training: what survives (compute.py, then render.py)."""
