#!/usr/bin/env bash
# The GPU checklist: see scripts/gpu_checklist.py (or run this with --help) for the parts and how to carry them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "$here/gpu_checklist.py" "$@"
