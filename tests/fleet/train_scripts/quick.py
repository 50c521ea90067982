"""Ends at once (for the idle-stop test)."""
import time

time.sleep(1.0)
print("quick job done at %.3f" % time.time())
