"""Hosts, groups and variables: from inventories, target strings, ssh_config, or localhost."""

from provision.inventory.model import Host, Inventory

__all__ = ["Host", "Inventory"]
