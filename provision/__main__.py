from provision.cli.main import main

raise SystemExit(main())
