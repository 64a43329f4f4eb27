#!/bin/sh
# clanker's Antigravity attention guard (the plugin clanker-grid-attention runs it
# for every hook it declares: `/bin/sh guard.sh <Event>`, the payload on stdin).
#
# Inert unless this agy was launched by clanker with attention: it forwards the
# payload to the launch's hook bridge only when every CLANKER_ATTENTION_* variable
# is set, names clanker's agy interpreter, and its files still exist (on an SSH
# host: the launch directory's hook and interpreter, which still exist). Whatever
# happens it prints `{}` (no decision: agy goes on as if no hook had run) and
# exits 0, so a missing or broken launch can never block a tool or a turn.
# Written from the spec and public descriptions of agy's hooks; never run by agy
# here (docs/harnesses/agy.md, "Attention").

neutral() {
    printf '{}\n'
    exit 0
}

inert() {
    cat >/dev/null 2>&1
    neutral
}

event=${1-}
case $event in
    PreInvocation | PreToolUse | PostToolUse | Stop) ;;
    *) inert ;;
esac

command=${CLANKER_ATTENTION_COMMAND-}
interpreter=${CLANKER_ATTENTION_INTERPRETER-}
state=${CLANKER_ATTENTION_STATE-}
socket=${CLANKER_ATTENTION_SOCKET-}
case $command in /*) ;; *) inert ;; esac
launch=${command%/hook}
if [ "$launch/hook" = "$command" ] && [ "$interpreter" = "$launch/attention_interpreter.py" ]
then
    # A launch on an SSH host: its launch directory under clanker's own directory
    # holds the hook, which sets the bridge's variables (the credential among them)
    # itself and writes to this terminal; once the launch ends the directory is gone.
    case $launch in */.local/state/clanker/attention/*) ;; *) inert ;; esac
    [ -d "$launch/state" ] || inert
else
    case $interpreter in */clanker_agy/attention_interpreter.py) ;; *) inert ;; esac
    case $state in /*) ;; *) inert ;; esac
    case $socket in /*) ;; *) inert ;; esac
    [ -n "${CLANKER_ATTENTION_TERMINAL-}" ] || inert
    [ -n "${CLANKER_ATTENTION_TOKEN-}" ] || inert
    [ -d "$state" ] || inert
    [ -S "$socket" ] || inert
fi
[ -f "$command" ] && [ -x "$command" ] || inert
[ -f "$interpreter" ] || inert

# agy names no event in its payload: wrap it, unparsed, with the event this hook
# was declared for. A payload that is not JSON stays not JSON, and the bridge
# drops it. The bridge's own output and errors never reach agy.
{
    printf '{"agyHookEvent":"%s","payload":' "$event"
    cat
    printf '}'
} 2>/dev/null | "$command" >/dev/null 2>&1
neutral
