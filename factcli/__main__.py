from factcli.cli.app import main

main()
