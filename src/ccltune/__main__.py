from ccltune.cli import entry

entry()
