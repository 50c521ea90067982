# (c) 2020, Alexei Znamensky <russoz@gmail.com>
# Copyright (c) 2020, Ansible Project
# Simplified BSD License (see LICENSES/BSD-2-Clause.txt or https://opensource.org/licenses/BSD-2-Clause)
# SPDX-License-Identifier: BSD-2-Clause

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

from __future__ import annotations

# pylint: disable=unused-import
from ansible_collections.community.general.plugins.module_utils._mh.deco import (  # noqa: F401
    cause_changes,
    check_mode_skip,
    check_mode_skip_returns,
    module_fails_on_exception,
)
from ansible_collections.community.general.plugins.module_utils._mh.exceptions import (
    ModuleHelperException,  # noqa: F401
)
from ansible_collections.community.general.plugins.module_utils._mh.module_helper import (  # noqa: F401
    ModuleHelper,
    StateModuleHelper,
)
