"""Research studies beside the library, one subpackage each; run their scripts from the repository root as
`python -m experiments.STUDY.SCRIPT` (see experiments/README.md)."""
