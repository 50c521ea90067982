import sys

from provision.agent.protocol import main

sys.exit(main())
