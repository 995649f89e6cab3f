from factcli.cli.main import main

main()
