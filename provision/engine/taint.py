"""Re-export of provision/taint.py, where the data mark lives now (below inventory/, whose vars
files load through provision/yamlpos.py, which marks `!unsafe` values with it). Kept so engine's
own imports stay as they are; new code imports provision.taint."""

from provision.taint import (
    DataDict,
    DataList,
    DataStr,
    HostDict,
    HostList,
    HostStr,
    as_data,
    as_host_data,
    is_data,
    is_host_data,
)

__all__ = ["DataDict", "DataList", "DataStr", "HostDict", "HostList", "HostStr", "as_data",
           "as_host_data", "is_data", "is_host_data"]  # fmt: skip
