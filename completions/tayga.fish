# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_tayga_global_optspecs
    string join \n config= json wide timeout= h/help V/version
end

function __fish_tayga_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_tayga_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_tayga_using_subcommand
    set -l cmd (__fish_tayga_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c tayga -n "__fish_tayga_needs_command" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_needs_command" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_needs_command" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_needs_command" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_needs_command" -s h -l help -d 'Print help'
complete -c tayga -n "__fish_tayga_needs_command" -s V -l version -d 'Print version'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "config" -d 'Show or check the effective configuration'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "migrate" -d 'Create the ClickHouse database and tables, or upgrade them to the current schema'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "topics" -d 'Create Tayga\'s Kafka topics, or show their partitions and consumer lag'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "serve" -d 'Run one daemon, or every daemon in one process (`all`)'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "up" -d 'Run the whole pipeline on this machine: start ClickHouse and the broker when none answers, migrate, create the topics, run every service; `--demo` adds a scenario'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "deliveries" -d 'Show the delivery state of an alert to each webhook target'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "silences" -d 'Hold back the delivery of matching alerts for a while (silences), list them, expire them'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "remine" -d 'Re-mine the stored logs with the current masking rules, rebuilding templates and hits'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "alerts" -d 'List alerts, or republish them to the alerts topic'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "logs" -d 'Search the stored logs, newest first, or follow new lines as they arrive (`--follow`)'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "traces" -d 'Search the stored traces by service, operation, duration, status and attributes'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "trace" -d 'One trace: its spans as a waterfall that fits the terminal, and its logs'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "templates" -d 'Log templates: list them with counts and the last hour\'s sparkline, or show one and its lines'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "shapes" -d 'Trace shapes: list an hour\'s shapes by count, or diff two (edges added and removed, calls and self time)'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "scale" -d 'Change how many replicas of a scalable daemon run (the logminer)'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "loadgen" -d 'Send synthetic OTLP traffic to an ingest, at a set rate, and report what it achieved'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "mine" -d 'Mine log templates from a plain log file, offline, with the logminer\'s engine'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "man" -d 'Print the man page (through `man` on a terminal), or write one page per subcommand into a directory'
complete -c tayga -n "__fish_tayga_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand config; and not __fish_seen_subcommand_from show check help" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand config; and not __fish_seen_subcommand_from show check help" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand config; and not __fish_seen_subcommand_from show check help" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand config; and not __fish_seen_subcommand_from show check help" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand config; and not __fish_seen_subcommand_from show check help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand config; and not __fish_seen_subcommand_from show check help" -f -a "show" -d 'Print every setting with its value and where it came from (default, file, env)'
complete -c tayga -n "__fish_tayga_using_subcommand config; and not __fish_seen_subcommand_from show check help" -f -a "check" -d 'Validate the configuration; exit 1 with one line per problem'
complete -c tayga -n "__fish_tayga_using_subcommand config; and not __fish_seen_subcommand_from show check help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from show" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from show" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from show" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from show" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from check" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from check" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from check" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from check" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "show" -d 'Print every setting with its value and where it came from (default, file, env)'
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "check" -d 'Validate the configuration; exit 1 with one line per problem'
complete -c tayga -n "__fish_tayga_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand migrate" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand migrate" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand migrate" -l print -d 'Print the DDL statements instead of running them'
complete -c tayga -n "__fish_tayga_using_subcommand migrate" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand migrate" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand migrate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and not __fish_seen_subcommand_from create list help" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand topics; and not __fish_seen_subcommand_from create list help" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand topics; and not __fish_seen_subcommand_from create list help" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and not __fish_seen_subcommand_from create list help" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and not __fish_seen_subcommand_from create list help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and not __fish_seen_subcommand_from create list help" -f -a "create" -d 'Create the four topics (existing ones are reported and left as they are)'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and not __fish_seen_subcommand_from create list help" -f -a "list" -d 'Show each topic\'s partitions, records, and each consumer group\'s committed offsets and lag'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and not __fish_seen_subcommand_from create list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from create" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from create" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from create" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from create" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from list" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from list" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from list" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from list" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from help" -f -a "create" -d 'Create the four topics (existing ones are reported and left as they are)'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from help" -f -a "list" -d 'Show each topic\'s partitions, records, and each consumer group\'s committed offsets and lag'
complete -c tayga -n "__fish_tayga_using_subcommand topics; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand serve" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand serve" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand serve" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand serve" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand up" -l home -d 'Where a ClickHouse and a broker that tayga up starts keep their data and PID files' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand up" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand up" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand up" -l demo -d 'Send the built-in scenario (four services, then an error, a burst, a silence and a slow path) and receive the alerts on a webhook inside the process; shortens the detection windows'
complete -c tayga -n "__fish_tayga_using_subcommand up" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand up" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand up" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and not __fish_seen_subcommand_from show retry help" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and not __fish_seen_subcommand_from show retry help" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and not __fish_seen_subcommand_from show retry help" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and not __fish_seen_subcommand_from show retry help" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and not __fish_seen_subcommand_from show retry help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and not __fish_seen_subcommand_from show retry help" -f -a "show" -d 'The (alert, target) delivery rows of one alert: status, attempts, last error'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and not __fish_seen_subcommand_from show retry help" -f -a "retry" -d 'Retry a failed delivery: reset it to pending and republish the alert, once'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and not __fish_seen_subcommand_from show retry help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from show" -l alert-id -d 'The alert\'s id, as printed by `tayga alerts list` and sent in webhook payloads' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from show" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from show" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from show" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from show" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from retry" -l alert-id -d 'The alert\'s id, as printed by `tayga deliveries show` and sent in webhook payloads' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from retry" -l target -d 'Only this target (default: every failed target of the alert)' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from retry" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from retry" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from retry" -l dry-run -d 'Check and print what would be retried; change nothing'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from retry" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from retry" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from retry" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from help" -f -a "show" -d 'The (alert, target) delivery rows of one alert: status, attempts, last error'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from help" -f -a "retry" -d 'Retry a failed delivery: reset it to pending and republish the alert, once'
complete -c tayga -n "__fish_tayga_using_subcommand deliveries; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and not __fish_seen_subcommand_from add list expire help" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand silences; and not __fish_seen_subcommand_from add list expire help" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand silences; and not __fish_seen_subcommand_from add list expire help" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and not __fish_seen_subcommand_from add list expire help" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and not __fish_seen_subcommand_from add list expire help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and not __fish_seen_subcommand_from add list expire help" -f -a "add" -d 'Silence a service\'s alerts (optionally one kind, one template) from now for a duration'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and not __fish_seen_subcommand_from add list expire help" -f -a "list" -d 'The running silences (with --all, every silence ever made), newest first'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and not __fish_seen_subcommand_from add list expire help" -f -a "expire" -d 'End a silence now: matching alerts are delivered again from their next update'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and not __fish_seen_subcommand_from add list expire help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -l service -d 'The service whose alerts are held back' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -l kind -d 'Only alerts of this kind (default: every kind)' -r -f -a "new_template\t''
spike\t''
silence\t''
new_shape\t''
shape_slowdown\t''"
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -l template -d 'Only alerts of this template, its id as `tayga alerts list` prints it (default: every template)' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -l for -d 'How long the silence runs from now, e.g. 30m, 2h, 7d' -r
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -l comment -d 'Why: shown with the silence and on every row it holds back' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from list" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from list" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from list" -l all -d 'Every silence, also those that ended or were expired'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from list" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from list" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from expire" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from expire" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from expire" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from expire" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from expire" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from help" -f -a "add" -d 'Silence a service\'s alerts (optionally one kind, one template) from now for a duration'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from help" -f -a "list" -d 'The running silences (with --all, every silence ever made), newest first'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from help" -f -a "expire" -d 'End a silence now: matching alerts are delivered again from their next update'
complete -c tayga -n "__fish_tayga_using_subcommand silences; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand remine" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand remine" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand remine" -l dry-run -d 'Check the heartbeat rule and print what would be re-mined; change nothing'
complete -c tayga -n "__fish_tayga_using_subcommand remine" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand remine" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand remine" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and not __fish_seen_subcommand_from list republish help" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and not __fish_seen_subcommand_from list republish help" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and not __fish_seen_subcommand_from list republish help" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and not __fish_seen_subcommand_from list republish help" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and not __fish_seen_subcommand_from list republish help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and not __fish_seen_subcommand_from list republish help" -f -a "list" -d 'The newest version of each alert, most recently active first'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and not __fish_seen_subcommand_from list republish help" -f -a "republish" -d 'Publish alerts again to the alerts topic: every unmarked one of a window, or one by id'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and not __fish_seen_subcommand_from list republish help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from list" -l service -d 'Only alerts of this service' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from list" -l kind -d 'Only alerts of this kind' -r -f -a "new_template\t''
spike\t''
silence\t''
new_shape\t''
shape_slowdown\t''"
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from list" -l limit -d 'At most this many alerts (0: no limit)' -r
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from list" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from list" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from list" -l active -d 'Only active alerts: refreshed (last_at) within the last 5 minutes'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from list" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from list" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from republish" -l alert-id -d 'Republish this alert\'s newest version, even if it was already published' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from republish" -l since -d 'Republish unmarked alerts updated within this window, e.g. 30m, 24h, 7d (default: logminer.republish_window_hours, 24h)' -r
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from republish" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from republish" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from republish" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from republish" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from republish" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from help" -f -a "list" -d 'The newest version of each alert, most recently active first'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from help" -f -a "republish" -d 'Publish alerts again to the alerts topic: every unmarked one of a window, or one by id'
complete -c tayga -n "__fish_tayga_using_subcommand alerts; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand logs" -l service -d 'Only lines of this service (the same as service:NAME in the query)' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand logs" -l since -d 'Search this far back from now, e.g. 15m, 1h, 7d (default 1h)' -r
complete -c tayga -n "__fish_tayga_using_subcommand logs" -l from -d 'Search from this time: RFC 3339 UTC (2026-12-04T03:00:00Z), `YYYY-MM-DD HH:MM[:SS]` in UTC, or Unix ns' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand logs" -l to -d 'Search up to this time (default: now); same forms as --from' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand logs" -l limit -d 'At most this many lines (newest first; with --follow, the newest of the window before following)' -r
complete -c tayga -n "__fish_tayga_using_subcommand logs" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand logs" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand logs" -s f -l follow -d 'Keep printing new lines as they are stored, like `tail -f`'
complete -c tayga -n "__fish_tayga_using_subcommand logs" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand logs" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand logs" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l service -d 'Traces with a span of this service' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l operation -d 'Traces with a span of this name (the operation)' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l min-duration -d 'Traces with a matching span at least this long, e.g. 250ms, 1.5s, 2m' -r
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l max-duration -d 'Traces whose matching spans are at most this long' -r
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l status -d 'Only traces with an error span, or only those without' -r -f -a "error\t'Traces with an error span'
ok\t'Traces without an error span'"
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l attr -d 'A span (or resource) attribute the matching span has, key=value; repeatable' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l since -d 'Search this far back from now, e.g. 15m, 1h, 7d (default 1h)' -r
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l from -d 'Search from this time: RFC 3339 UTC (2026-12-04T03:00:00Z), `YYYY-MM-DD HH:MM[:SS]` in UTC, or Unix ns' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l to -d 'Search up to this time (default: now); same forms as --from' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l limit -d 'At most this many traces, the most recent first' -r
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand traces" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand traces" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand trace" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand trace" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand trace" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand trace" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand trace" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and not __fish_seen_subcommand_from list show help" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand templates; and not __fish_seen_subcommand_from list show help" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand templates; and not __fish_seen_subcommand_from list show help" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and not __fish_seen_subcommand_from list show help" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and not __fish_seen_subcommand_from list show help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and not __fish_seen_subcommand_from list show help" -f -a "list" -d 'Templates, the most frequent first: count, first and last seen, the last hour\'s lines per minute'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and not __fish_seen_subcommand_from list show help" -f -a "show" -d 'One template: its text, counts, the last hour per minute, and its most recent lines'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and not __fish_seen_subcommand_from list show help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from list" -l service -d 'Only templates of this service' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from list" -l limit -d 'At most this many templates (0: every one)' -r
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from list" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from list" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from list" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from list" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from show" -l service -d 'The template\'s service (needed only when two services have a template of this id)' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from show" -l lines -d 'How many of its most recent lines to print' -r
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from show" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from show" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from show" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from show" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from help" -f -a "list" -d 'Templates, the most frequent first: count, first and last seen, the last hour\'s lines per minute'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from help" -f -a "show" -d 'One template: its text, counts, the last hour per minute, and its most recent lines'
complete -c tayga -n "__fish_tayga_using_subcommand templates; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and not __fish_seen_subcommand_from list diff help" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and not __fish_seen_subcommand_from list diff help" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and not __fish_seen_subcommand_from list diff help" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and not __fish_seen_subcommand_from list diff help" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and not __fish_seen_subcommand_from list diff help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and not __fish_seen_subcommand_from list diff help" -f -a "list" -d 'The shapes of a window, the most frequent first: count, p50 and p95 duration, errors, root, edges'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and not __fish_seen_subcommand_from list diff help" -f -a "diff" -d 'What differs between two shapes: B\'s edges added and removed against A, and per edge the calls and self time in each shape\'s newest trace of the window'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and not __fish_seen_subcommand_from list diff help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from list" -l service -d 'Only shapes whose stories pass through this service' -r -f
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from list" -l since -d 'The window: this far back from now, e.g. 15m, 1h, 7d (default 1h)' -r
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from list" -l limit -d 'At most this many shapes' -r
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from list" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from list" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from list" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from list" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from diff" -l since -d 'Each side\'s newest story within this far back from now (default 24h)' -r
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from diff" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from diff" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from diff" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from diff" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from help" -f -a "list" -d 'The shapes of a window, the most frequent first: count, p50 and p95 duration, errors, root, edges'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from help" -f -a "diff" -d 'What differs between two shapes: B\'s edges added and removed against A, and per edge the calls and self time in each shape\'s newest trace of the window'
complete -c tayga -n "__fish_tayga_using_subcommand shapes; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and not __fish_seen_subcommand_from logminer help" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand scale; and not __fish_seen_subcommand_from logminer help" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand scale; and not __fish_seen_subcommand_from logminer help" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and not __fish_seen_subcommand_from logminer help" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and not __fish_seen_subcommand_from logminer help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and not __fish_seen_subcommand_from logminer help" -f -a "logminer" -d 'Set the number of logminer replicas (1 to the partitions of the logs topic, at most 12)'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and not __fish_seen_subcommand_from logminer help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and __fish_seen_subcommand_from logminer" -l env-file -d 'The Compose env file to set LOGMINER_REPLICAS in (created if absent)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand scale; and __fish_seen_subcommand_from logminer" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand scale; and __fish_seen_subcommand_from logminer" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand scale; and __fish_seen_subcommand_from logminer" -l dry-run -d 'Print the plan; change nothing'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and __fish_seen_subcommand_from logminer" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and __fish_seen_subcommand_from logminer" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and __fish_seen_subcommand_from logminer" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and __fish_seen_subcommand_from help" -f -a "logminer" -d 'Set the number of logminer replicas (1 to the partitions of the logs topic, at most 12)'
complete -c tayga -n "__fish_tayga_using_subcommand scale; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l protocol -d 'OTLP/HTTP or OTLP/gRPC' -r -f -a "http\t'OTLP/HTTP with protobuf bodies'
grpc\t'OTLP/gRPC'"
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l endpoint -d 'Ingest\'s address (default: http://127.0.0.1:4318 for http, http://127.0.0.1:4317 for grpc)' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l rate -d 'Requests per second, over all connections (0.001 to 1000000); 0 sends as fast as ingest answers' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l duration -d 'How long to send: 90s, 5m, 1h, or a number of seconds' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l concurrency -d 'Requests in flight at once (with --open-loop: at most; a request due while this many are in flight is not sent, and counted as not sent)' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l services -d 'Distinct services the traffic comes from' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l traces-per-request -d 'Traces in each traces request (0: send no traces)' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l spans-per-trace -d 'Spans in each trace' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l logs-per-request -d 'Logs in each logs request (0: send no logs)' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l exception-every -d 'Every this many spans, one records an exception event with a stack trace, as SDKs do (0: none)' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l acked-ids -d 'Write the identity of every span and log line an acknowledged request carried to FILE, one per line (`span TRACE_ID SPAN_ID`, `log LOG_ID`), to reconcile what was stored with what was acknowledged' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l open-loop -d 'Send each request at its due time whether or not earlier ones were answered (needs --rate above 0), and time each from its due time, so a slow answer is not hidden by sending less'
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand loadgen" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l service -d 'Service the lines belong to (templates ids are per service)' -r
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l format -d 'Output format: csv (header `line,template_id,template`), json (one object per line) or table' -r -f -a "csv\t''
json\t''
table\t''"
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l mining-config -d 'TOML file with `[drain]` and `[masking]` tables (the keys of `[logminer.drain]` and `[logminer.masking]` in tayga.toml). Without it, the logminer\'s own settings (tayga.toml and environment) are used, so offline ids match the logminer\'s' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l templates -d 'Print the templates with their counts, most frequent first, instead of one row per line'
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l stats -d 'Print lines, templates, lines/s and peak memory to stderr'
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l online -d 'Print each line as soon as it is mined, with its template as it was then, instead of the final templates at the end (for pipes that never end)'
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l no-memo -d 'Search the template tree for every line, without remembering the masked lines already matched (slower on repetitive files; the templates are the same)'
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand mine" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand mine" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand completions" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand completions" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand completions" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand completions" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand man" -l dir -d 'Write tayga.1 and a page per subcommand into this directory' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand man" -l config -d 'Configuration file (default: ./tayga.toml when it exists)' -r -F
complete -c tayga -n "__fish_tayga_using_subcommand man" -l timeout -d 'How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m' -r
complete -c tayga -n "__fish_tayga_using_subcommand man" -l json -d 'Print data as JSON instead of tables (commands that print no data refuse it)'
complete -c tayga -n "__fish_tayga_using_subcommand man" -l wide -d 'Print tables whole, at any width, instead of cutting the widest columns to fit the terminal'
complete -c tayga -n "__fish_tayga_using_subcommand man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "config" -d 'Show or check the effective configuration'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "migrate" -d 'Create the ClickHouse database and tables, or upgrade them to the current schema'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "topics" -d 'Create Tayga\'s Kafka topics, or show their partitions and consumer lag'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "serve" -d 'Run one daemon, or every daemon in one process (`all`)'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "up" -d 'Run the whole pipeline on this machine: start ClickHouse and the broker when none answers, migrate, create the topics, run every service; `--demo` adds a scenario'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "deliveries" -d 'Show the delivery state of an alert to each webhook target'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "silences" -d 'Hold back the delivery of matching alerts for a while (silences), list them, expire them'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "remine" -d 'Re-mine the stored logs with the current masking rules, rebuilding templates and hits'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "alerts" -d 'List alerts, or republish them to the alerts topic'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "logs" -d 'Search the stored logs, newest first, or follow new lines as they arrive (`--follow`)'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "traces" -d 'Search the stored traces by service, operation, duration, status and attributes'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "trace" -d 'One trace: its spans as a waterfall that fits the terminal, and its logs'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "templates" -d 'Log templates: list them with counts and the last hour\'s sparkline, or show one and its lines'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "shapes" -d 'Trace shapes: list an hour\'s shapes by count, or diff two (edges added and removed, calls and self time)'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "scale" -d 'Change how many replicas of a scalable daemon run (the logminer)'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "loadgen" -d 'Send synthetic OTLP traffic to an ingest, at a set rate, and report what it achieved'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "mine" -d 'Mine log templates from a plain log file, offline, with the logminer\'s engine'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "completions" -d 'Print a shell completion script'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "man" -d 'Print the man page (through `man` on a terminal), or write one page per subcommand into a directory'
complete -c tayga -n "__fish_tayga_using_subcommand help; and not __fish_seen_subcommand_from config migrate topics serve up deliveries silences remine alerts logs traces trace templates shapes scale loadgen mine completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from config" -f -a "show" -d 'Print every setting with its value and where it came from (default, file, env)'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from config" -f -a "check" -d 'Validate the configuration; exit 1 with one line per problem'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from topics" -f -a "create" -d 'Create the four topics (existing ones are reported and left as they are)'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from topics" -f -a "list" -d 'Show each topic\'s partitions, records, and each consumer group\'s committed offsets and lag'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from deliveries" -f -a "show" -d 'The (alert, target) delivery rows of one alert: status, attempts, last error'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from deliveries" -f -a "retry" -d 'Retry a failed delivery: reset it to pending and republish the alert, once'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from silences" -f -a "add" -d 'Silence a service\'s alerts (optionally one kind, one template) from now for a duration'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from silences" -f -a "list" -d 'The running silences (with --all, every silence ever made), newest first'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from silences" -f -a "expire" -d 'End a silence now: matching alerts are delivered again from their next update'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from alerts" -f -a "list" -d 'The newest version of each alert, most recently active first'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from alerts" -f -a "republish" -d 'Publish alerts again to the alerts topic: every unmarked one of a window, or one by id'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from templates" -f -a "list" -d 'Templates, the most frequent first: count, first and last seen, the last hour\'s lines per minute'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from templates" -f -a "show" -d 'One template: its text, counts, the last hour per minute, and its most recent lines'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from shapes" -f -a "list" -d 'The shapes of a window, the most frequent first: count, p50 and p95 duration, errors, root, edges'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from shapes" -f -a "diff" -d 'What differs between two shapes: B\'s edges added and removed against A, and per edge the calls and self time in each shape\'s newest trace of the window'
complete -c tayga -n "__fish_tayga_using_subcommand help; and __fish_seen_subcommand_from scale" -f -a "logminer" -d 'Set the number of logminer replicas (1 to the partitions of the logs topic, at most 12)'
