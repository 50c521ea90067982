from provision.cli.main import run

run()
