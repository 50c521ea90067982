"""Re-export of provision/yamlpos.py, where YAML with file:line:col lives now (below inventory/,
whose vars files load through it). Kept so engine's own imports stay as they are; new code
imports provision.yamlpos."""

from provision.yamlpos import Pos, YList, YMap, display_path, load_yaml, loads

__all__ = ["Pos", "YList", "YMap", "display_path", "load_yaml", "loads"]
