from polymnesia.cli.main import exit_process, main

exit_process(main())
