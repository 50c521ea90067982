#!/bin/sh
# run by the script module: prints its arguments one per line, and where it ran
echo "cwd=$(pwd)"
for a in "$@"; do echo "arg=$a"; done
echo "to stderr" >&2
