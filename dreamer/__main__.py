from dreamer.cli import main

main()
