"""The command line: ``rag-gate run | merge | show | validate | plan | golden check | golden generate |
baseline update | history record | cache merge``.

    main       main(): the arguments parsed, the command run, every error turned into a message and an exit code
    parser     the arguments of every command
    commands   run, merge, show, validate, plan, baseline update, history record, cache merge
    golden     golden check and golden generate (which writes with gate.cli.generate)
    ping       validate --ping: one call to the target and the judge

Exit codes (gate.core.errors): 0 every gate passed, 1 a gate failed, 2 invalid input, 3 the run could not complete.
"""
