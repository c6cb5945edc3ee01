#!/usr/bin/env bash
# The nemesis of the fault-injection run (scripts/fault-run.sh, docs/reliability.md): breaks
# the running compose stack on a schedule drawn from a seed, heals it, and writes what it did
# to a timeline, one JSON line per fault start and end:
#
#   {"unix_ms":…,"seq":3,"fault":"pause-shard","target":"postgres-shard-1","phase":"start","detail":"9s"}
#
# The last line is {"fault":"nemesis","phase":"end"}, written once everything is healed:
# every service running and unpaused, every move it started finished (resumed if a fault
# stopped it), both web replicas ready. `loadgen --timeline` waits for it before reading back.
#
#   scripts/nemesis.sh --timeline FILE [--seed N] [--duration SECONDS] [--plan full|short]
#                      [--tenants N] [--dry-run]
#
# Plans:
#   full  (default, 300 s): one fault at a time, in a seeded order, repeated while time is
#         left: kill -9 of a web replica, of the worker, and of a move_slot mid-move (then
#         resume or abort, by the seed); a shard primary paused for 5-15 s; a shard primary
#         stopped and started; the shard replica stopped; the control database stopped and
#         started; a rolling restart of both web replicas. Beside them, every 15 s, a random
#         tenant of loadgen's population (tenant-0001 …) moves to the other shard, and once a
#         512-slot range moves from shard0 to shard1.
#   short (60 s, CI): one web replica killed, one shard primary paused, two tenant moves.
#
# Uses the compose project and files of the environment (COMPOSE_PROJECT_NAME,
# COMPOSE_FILE), as `docker compose` does; the stack must have two shards (shard0 with its
# replica, shard1). Every wait is bounded; on exit, however it ends, it heals the stack.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/services.sh
. scripts/lib/services.sh

SEED=1
DURATION=
PLAN=full
TENANTS=300
TIMELINE=
DRY_RUN=0
usage() { sed -n '13,14p' "$0" | sed 's/^# \{0,1\}//' >&2; }
while [ $# -gt 0 ]; do
	case $1 in
	--seed) SEED=${2:-} && shift ;;
	--duration) DURATION=${2:-} && shift ;;
	--plan) PLAN=${2:-} && shift ;;
	--tenants) TENANTS=${2:-} && shift ;;
	--timeline) TIMELINE=${2:-} && shift ;;
	--dry-run) DRY_RUN=1 ;;
	-h | --help) usage && exit 0 ;;
	*) echo "nemesis: unknown argument $1" >&2 && usage && exit 2 ;;
	esac
	shift
done
number() { [[ $2 =~ ^[0-9]+$ ]] || { echo "nemesis: $1 must be a whole number, not '$2'" >&2; exit 2; }; }
number --seed "$SEED"
number --tenants "$TENANTS"
[ "$TENANTS" -ge 1 ] || { echo "nemesis: --tenants must be at least 1" >&2; exit 2; }
case $PLAN in
full) DURATION=${DURATION:-300} ;;
short) DURATION=${DURATION:-60} ;;
*) echo "nemesis: --plan must be full or short, not '$PLAN'" >&2 && exit 2 ;;
esac
number --duration "$DURATION"
[ "$DRY_RUN" = 1 ] || [ -n "$TIMELINE" ] || { echo "nemesis: --timeline FILE is required" >&2; exit 2; }

say() { echo "nemesis: [$((SECONDS))s] $*" >&2; }
now_ms() { date +%s%3N; }
SEQ=0
# event SEQ FAULT TARGET PHASE DETAIL: one timeline line.
event() {
	[ "$DRY_RUN" = 1 ] && return 0
	printf '{"unix_ms":%s,"seq":%s,"fault":"%s","target":"%s","phase":"%s","detail":"%s"}\n' \
		"$(now_ms)" "$1" "$2" "$3" "$4" "${5//\"/\'}" >>"$TIMELINE"
}

# ---------------------------------------------------------------------------------------
# The schedule, drawn from the seed before anything runs: bash's RANDOM is a seeded
# generator, read here only in this shell (a subshell, `$(…)`, would draw from a re-seeded
# copy), so that a seed names one run.
RANDOM=$SEED
pick() { R=$((RANDOM % $1)); }                   # R = 0 … n-1
between() { R=$(($1 + RANDOM % ($2 - $1 + 1))); } # R = a … b
tenant() { pick "$TENANTS" && printf -v R 'tenant-%04d' $((R + 1)); }

FAULTS=() # "kind target param" in the order they run
MOVES=()  # "second tenant"
RANGE_MOVE=
if [ "$PLAN" = short ]; then
	pick 2 && FAULTS+=("kill-web web$((R + 1)) 3")
	pick 2 && FAULTS+=("pause-shard postgres-shard-$R 6")
	tenant && MOVES+=("12 $R")
	tenant && MOVES+=("30 $R")
	GAP_MIN=6 GAP_MAX=10 MOVE_GRACE=5s
else
	kinds=(kill-web kill-worker kill-move pause-shard restart-shard stop-replica restart-control roll)
	# A seeded shuffle (Fisher-Yates), then the kinds again in the same order while time lasts.
	for ((i = ${#kinds[@]} - 1; i > 0; i--)); do
		pick $((i + 1))
		t=${kinds[i]} && kinds[i]=${kinds[R]} && kinds[R]=$t
	done
	for _ in 1 2 3; do
		for kind in "${kinds[@]}"; do
			case $kind in
			kill-web) pick 2 && w=$((R + 1)) && between 2 5 && FAULTS+=("kill-web web$w $R") ;;
			kill-worker) between 2 5 && FAULTS+=("kill-worker worker $R") ;;
			kill-move)
				pick 2 && action=resume && [ "$R" = 1 ] && action=abort
				tenant && t=$R && between 1 4 && FAULTS+=("kill-move $t $R:$action")
				;;
			pause-shard) pick 2 && s=$R && between 5 15 && FAULTS+=("pause-shard postgres-shard-$s $R") ;;
			restart-shard) pick 2 && s=$R && between 5 10 && FAULTS+=("restart-shard postgres-shard-$s $R") ;;
			stop-replica) between 10 20 && FAULTS+=("stop-replica postgres-shard-0-replica $R") ;;
			restart-control) between 5 10 && FAULTS+=("restart-control postgres-control $R") ;;
			roll) FAULTS+=("roll web1,web2 0") ;;
			esac
		done
	done
	for ((s = 15; s <= DURATION - 20; s += 15)); do
		tenant && MOVES+=("$s $R")
	done
	pick 15 && start=$((512 * R))
	between $((DURATION / 3)) $((DURATION / 2)) && RANGE_MOVE="$R $start-$((start + 511))"
	GAP_MIN=5 GAP_MAX=12 MOVE_GRACE=
fi
GAPS=()
for _ in "${FAULTS[@]}"; do between "$GAP_MIN" "$GAP_MAX" && GAPS+=("$R"); done

if [ "$DRY_RUN" = 1 ]; then
	echo "seed $SEED, plan $PLAN, ${DURATION}s"
	for i in "${!FAULTS[@]}"; do echo "fault: ${FAULTS[i]} (then ${GAPS[i]}s)"; done
	for m in "${MOVES[@]}"; do echo "move at ${m% *}s: ${m#* }"; done
	[ -z "$RANGE_MOVE" ] || echo "range move at ${RANGE_MOVE% *}s: slots ${RANGE_MOVE#* }"
	exit 0
fi

# ---------------------------------------------------------------------------------------
# Faults.
PAUSED=()  # services paused right now
STOPPED=() # services stopped right now
MOVE_PIDS=()
STARTED_AT=$SECONDS

other_shard() { [ "$1" = shard0 ] && echo shard1 || echo shard0; }
move_slot() { timeout 180 docker compose run --rm -T move_slot "$@"; }

# route_of TENANT: the shard the web replicas route TENANT to (asked of either replica).
route_of() {
	local out service
	for service in web1 web2; do
		out=$(timeout 20 docker compose exec -T "$service" bookmarks route "$1" 2>/dev/null) || continue
		python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["shard"])' <<<"$out" && return 0
	done
	return 1
}

# unfinished_moves: "id tenants-or-slots" of every move neither done nor aborted.
unfinished_moves() {
	move_slot status 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("state") not in ("done", "aborted"):
        print(m["id"], m.get("slots") or ",".join(m.get("tenants") or []))'
}

# finish_move ID: resumes a stopped move to its end, a few times if a fault is in the way.
finish_move() {
	local attempt
	for attempt in 1 2 3 4 5 6; do
		move_slot resume "$1" --confirm ${MOVE_GRACE:+--grace "$MOVE_GRACE"} >/dev/null 2>&1 && return 0
		say "move $1: resume attempt $attempt failed; again in 5 s"
		sleep 5
	done
	return 1
}

# run_move SEQ TENANT|"--slots RANGE" FROM TO: a whole move, resumed if a fault stops it.
run_move() {
	local seq=$1 what=$2 from=$3 to=$4 target result id
	target=${what#--slots }
	local args=(--tenant "$what")
	[[ $what == --slots* ]] && args=(--slots "$target")
	event "$seq" move "$target" start "$from->$to"
	move_slot run --from "$from" --to "$to" "${args[@]}" --confirm ${MOVE_GRACE:+--grace "$MOVE_GRACE"} >/dev/null 2>&1
	case $? in
	0) result=done ;;
	2) result=refused ;; # the tenant is in another move, say: nothing changed
	*)
		result="stopped"
		id=$(unfinished_moves | awk -v t="$target" '$2 == t {print $1}' | tail -1)
		if [ -n "$id" ]; then
			if finish_move "$id"; then result="stopped, resumed"; else result="stopped, not resumed"; fi
		fi
		;;
	esac
	event "$seq" move "$target" end "$result"
	say "move of $target $from->$to: $result"
}

# start_move SEQ TENANT|"--slots RANGE": a move in the background, from wherever the tenant
# routes now (a range: from shard0) to the other shard; at most three at once.
start_move() {
	local from alive=0 pid
	for pid in "${MOVE_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done
	if [ "$alive" -ge 3 ]; then
		event "$1" move "${2#--slots }" start "" && event "$1" move "${2#--slots }" end "skipped: three moves running"
		return
	fi
	if [[ $2 == --slots* ]]; then
		from=shard0
	elif ! from=$(route_of "$2"); then
		event "$1" move "$2" start "" && event "$1" move "$2" end "skipped: no replica could route it"
		return
	fi
	run_move "$1" "$2" "$from" "$(other_shard "$from")" &
	MOVE_PIDS+=($!)
}

# kill_move SEQ TENANT DELAY:ACTION: a move killed DELAY s in, then resumed or aborted.
kill_move() {
	local seq=$1 tenant=$2 delay=${3%:*} action=${3#*:} from container id result
	from=$(route_of "$tenant") || { event "$seq" kill-move "$tenant" end "skipped: route unknown"; return; }
	container="${COMPOSE_PROJECT_NAME:-bookmarks}-nemesis-move-$seq"
	docker compose run -d --name "$container" move_slot run --from "$from" --to "$(other_shard "$from")" \
		--tenant "$tenant" --confirm ${MOVE_GRACE:+--grace "$MOVE_GRACE"} >/dev/null 2>&1
	sleep "$delay"
	docker kill -s KILL "$container" >/dev/null 2>&1
	docker rm -f "$container" >/dev/null 2>&1
	id=$(unfinished_moves | awk -v t="$tenant" '$2 == t {print $1}' | tail -1)
	if [ -z "$id" ]; then
		result="killed after ${delay}s: no move left to $action (not started, or already done)"
	elif [ "$action" = abort ] && move_slot abort "$id" >/dev/null 2>&1; then
		result="killed after ${delay}s; move $id aborted"
	elif finish_move "$id"; then
		result="killed after ${delay}s; move $id resumed to the end"
		[ "$action" = abort ] && result="$result (abort refused: the destination had taken writes)"
	else
		result="killed after ${delay}s; move $id could not be finished"
	fi
	event "$seq" kill-move "$tenant" end "$result"
	say "kill-move $tenant: $result"
}

# restart_app SERVICE: started again, waited for, nginx told if its address changed.
restart_app() {
	local before=$2
	docker compose start "$1" >/dev/null 2>&1
	wait_ready "$1" 120 || say "$1 not ready after 120 s"
	[ "$1" = worker ] || follow_address "$1" "$before"
}

# one_fault SEQ KIND TARGET PARAM
one_fault() {
	local seq=$1 kind=$2 target=$3 param=$4 before
	local what=$param
	case $kind in
	kill-web | kill-worker) what="down ${param}s" ;;
	pause-shard) what="paused ${param}s" ;;
	restart-shard | stop-replica | restart-control) what="stopped ${param}s" ;;
	kill-move) what="killed ${param%:*}s in, then ${param#*:}" ;;
	roll) what="web1, then web2" ;;
	esac
	event "$seq" "$kind" "$target" start "$what"
	say "$kind $target ($what)"
	case $kind in
	kill-web | kill-worker)
		before=$(address_of "$target")
		docker compose kill -s SIGKILL "$target" >/dev/null 2>&1
		sleep "$param"
		restart_app "$target" "$before"
		;;
	kill-move)
		kill_move "$seq" "$target" "$param"
		return
		;;
	pause-shard)
		docker compose pause "$target" >/dev/null 2>&1 && PAUSED+=("$target")
		sleep "$param"
		docker compose unpause "$target" >/dev/null 2>&1 && PAUSED=()
		;;
	restart-shard | stop-replica | restart-control)
		docker compose stop -t 5 "$target" >/dev/null 2>&1 && STOPPED+=("$target")
		sleep "$param"
		docker compose start "$target" >/dev/null 2>&1 && STOPPED=()
		;;
	roll)
		scripts/rolling-restart.sh web1 web2 >/dev/null 2>&1 || say "the rolling restart failed"
		;;
	esac
	event "$seq" "$kind" "$target" end ""
}

# heal: everything running, unpaused, moves finished, replicas ready. Idempotent.
HEALED=0
heal() {
	[ "$HEALED" = 1 ] && return
	HEALED=1
	local s id _
	for s in "${PAUSED[@]}"; do docker compose unpause "$s" >/dev/null 2>&1; done
	docker compose start postgres-control postgres-shard-0 postgres-shard-0-replica postgres-shard-1 \
		web1 web2 worker >/dev/null 2>&1
	docker rm -f $(docker ps -aq --filter "name=${COMPOSE_PROJECT_NAME:-bookmarks}-nemesis-move-") >/dev/null 2>&1
	for pid in "${MOVE_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
	while read -r id _; do
		[ -n "$id" ] || continue
		say "move $id was left unfinished: resuming it"
		finish_move "$id" || say "move $id could not be finished"
	done < <(unfinished_moves)
	wait_ready web1 120 && wait_ready web2 120 || say "a web replica is not ready after healing"
	event $((++SEQ)) nemesis stack end "healed"
	say "healed; the timeline is in $TIMELINE"
}
trap heal EXIT
trap 'exit 130' INT TERM

event 0 nemesis stack start "seed $SEED, plan $PLAN, ${DURATION}s"
say "seed $SEED, plan $PLAN, ${DURATION}s"

# Moves start on their own clock and run in the background; faults run one after another.
next_move=0
next_fault=0
fault_due=8
range_done=0
while :; do
	elapsed=$((SECONDS - STARTED_AT))
	[ "$elapsed" -lt "$DURATION" ] || break
	if [ "$next_move" -lt "${#MOVES[@]}" ] && [ "${MOVES[next_move]% *}" -le "$elapsed" ]; then
		start_move $((++SEQ)) "${MOVES[next_move]#* }"
		next_move=$((next_move + 1))
		continue
	fi
	if [ -n "$RANGE_MOVE" ] && [ "$range_done" = 0 ] && [ "${RANGE_MOVE% *}" -le "$elapsed" ]; then
		start_move $((++SEQ)) "--slots ${RANGE_MOVE#* }"
		range_done=1
		continue
	fi
	# A fault starts only if it can end before the run does (a roll takes the longest).
	if [ "$next_fault" -lt "${#FAULTS[@]}" ] && [ "$fault_due" -le "$elapsed" ] && [ $((DURATION - elapsed)) -ge 25 ]; then
		read -r kind target param <<<"${FAULTS[next_fault]}"
		one_fault $((++SEQ)) "$kind" "$target" "$param"
		fault_due=$((SECONDS - STARTED_AT + GAPS[next_fault]))
		next_fault=$((next_fault + 1))
		continue
	fi
	sleep 0.5
done
say "time is up after $((SECONDS - STARTED_AT))s: $next_fault fault(s), $next_move tenant move(s); healing"
heal
