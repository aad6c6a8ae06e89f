from hedgefs.cli import main

main()
