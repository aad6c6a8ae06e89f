from hedgefs.client.cli import main

main()
