from dayone.cli import main

main()
