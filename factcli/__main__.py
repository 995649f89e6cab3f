from factcli.cli import main

main()
