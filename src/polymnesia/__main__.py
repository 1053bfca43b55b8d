from polymnesia.cli.main import main

raise SystemExit(main())
