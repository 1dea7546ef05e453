# Private PostgreSQL and Redis servers for `make test` and `make serve`. Sourced, never run.
#
# Each service lives in one directory of its own: its data, its log, its credentials and an `env`
# file (DATABASE_URL= or REDIS_URL=) that callers source. Both listen on loopback only, on the port
# they had last time (kept in DIR/port, so a URL that worked still works) unless another process
# has taken it, and require a password generated at first start. Nothing here
# uses systemd: PostgreSQL runs as the `postgres` user, through pg_ctl (postgres_start) or in the
# foreground under a supervisor (postgres_run); redis-server daemonizes with a pidfile
# (redis_start) or stays in the foreground (redis_run).

die() {
	echo "$(basename "$0"): $*" >&2
	exit 1
}

free_port() {
	"${VIRGO_PYTHON:-python3}" -c '
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])'
}

# port_for DIR: the port the service in DIR listened on last time (its URL stays valid), if it is
# still free; else a free one, and a word that its URL changes.
port_for() {
	local dir=$1 port
	port=$(cat "$dir/port" 2>/dev/null || true)
	if [ -n "$port" ] && "${VIRGO_PYTHON:-python3}" -c '
import socket, sys
with socket.socket() as s:
    # As the servers bind it: connections of the last run waiting out TIME_WAIT do not count.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
		echo "$port"
		return
	fi
	[ -z "$port" ] || echo "$(basename "$0"): port $port of $dir is taken; its URL changes" >&2
	free_port
}

new_secret() {
	od -An -N24 -tx1 /dev/urandom | tr -d ' \n'
}

# detached COMMAND...: with VIRGO_DETACHED=1 (make serve), COMMAND runs in a session of its own,
# so a signal to the caller's process group (Ctrl-C, `kill -- -PGID`) cannot kill a service
# halfway through its start; the caller's trap stops it once started (VX-SCALE-3).
detached() {
	if [ "${VIRGO_DETACHED:-}" = 1 ]; then
		setsid -w "$@"
	else
		"$@"
	fi
}

# PostgreSQL refuses to run as root; root hands the cluster to the `postgres` user instead.
as_postgres() {
	if [ "$(id -u)" = 0 ]; then
		detached runuser -u postgres -- "$@"
	else
		detached "$@"
	fi
}

postgres_bindir() {
	local candidate
	candidate=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	if [ -n "$candidate" ] && [ -x "$candidate/initdb" ]; then
		echo "$candidate"
	elif command -v initdb >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
	else
		return 1
	fi
}

# Install the named Debian packages that are missing: one `apt-get update`, one install.
install_debian_packages() {
	[ $# -eq 0 ] && return 0
	command -v apt-get >/dev/null 2>&1 || die "missing $*, and this machine has no apt-get"
	local sudo=()
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null 2>&1 || die "installing $* needs root (or sudo)"
		sudo=(sudo)
	fi
	echo "Installing Debian packages: $*"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

missing_service_packages() {
	postgres_bindir >/dev/null || echo postgresql
	command -v redis-server >/dev/null 2>&1 || echo redis-server
}

# postgres_init DIR [fast]: the cluster in DIR/data, initialised on first use. `fast` turns off
# fsync and friends: only for clusters thrown away afterwards.
postgres_init() {
	local dir=$1 mode=${2:-durable} bin data
	bin=$(postgres_bindir) || die "PostgreSQL server binaries not found (apt-get install postgresql)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	data=$dir/data
	# The postgres user must reach its data directory through this one.
	chmod 711 "$dir"
	[ -s "$data/PG_VERSION" ] && return 0
	rm -rf "$data"
	mkdir -m 700 "$data"
	[ "$(id -u)" = 0 ] && chown postgres: "$data"
	as_postgres test -w "$data" || die "the postgres user cannot write $data; use a directory it can reach"
	as_postgres "$bin/initdb" -D "$data" -U postgres -E UTF8 --no-locale \
		--auth-local=trust --auth-host=scram-sha-256 $([ "$mode" = fast ] && echo --no-sync) >/dev/null
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "unix_socket_directories = '$data'"
		if [ "$mode" = fast ]; then
			echo "fsync = off"
			echo "synchronous_commit = off"
			echo "full_page_writes = off"
		fi
	} | as_postgres tee -a "$data/postgresql.conf" >/dev/null
	rm -f "$dir/env"
}

# postgres_provision DIR: once the cluster runs on the port in DIR/port, the role and database
# `virgo` on its first start (the role may create databases, as the test runner's test_virgo
# needs), and DIR/env.
postgres_provision() {
	local dir=$1 bin port password
	bin=$(postgres_bindir) || die "PostgreSQL server binaries not found (apt-get install postgresql)"
	port=$(cat "$dir/port")
	if [ -s "$dir/password" ]; then
		password=$(cat "$dir/password")
	else
		password=$(new_secret)
		as_postgres "$bin/psql" -h "$dir/data" -p "$port" -U postgres -d postgres -q -v ON_ERROR_STOP=1 >/dev/null <<-SQL
			CREATE ROLE virgo LOGIN CREATEDB PASSWORD '$password';
			CREATE DATABASE virgo OWNER virgo;
		SQL
		(umask 077 && echo "$password" >"$dir/password")
	fi
	(umask 077 && echo "DATABASE_URL=postgres://virgo:$password@127.0.0.1:$port/virgo" >"$dir/env")
}

# postgres_start DIR [fast]: start the cluster in the background through pg_ctl (initialising and
# provisioning it on first use).
postgres_start() {
	local dir=$1 mode=${2:-durable} bin data port attempt
	postgres_init "$dir" "$mode"
	bin=$(postgres_bindir)
	dir=$(cd "$dir" && pwd)
	data=$dir/data
	if as_postgres "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
		[ -s "$dir/env" ] || die "a cluster runs in $data but $dir/env is missing"
		return 0
	fi
	for attempt in 1 2 3; do
		port=$(port_for "$dir")
		if as_postgres "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 -o "-p $port" start >/dev/null; then
			break
		fi
		rm -f "$dir/port"
		[ "$attempt" = 3 ] && { tail -n 20 "$data/server.log" >&2; die "PostgreSQL did not start"; }
	done
	echo "$port" >"$dir/port"
	postgres_provision "$dir"
}

# postgres_run DIR: the cluster's server in the foreground, on the port in DIR/port, logging to
# DIR/data/server.log as pg_ctl's start does. Exec'd, so that a supervisor's child is the
# postmaster itself: runuser and pg_ctl would stand between them and hide its death.
postgres_run() {
	local dir=$1 bin
	bin=$(postgres_bindir) || die "PostgreSQL server binaries not found (apt-get install postgresql)"
	local server=("$bin/postgres" -D "$dir/data" -p "$(cat "$dir/port")")
	if [ "$(id -u)" = 0 ]; then
		# setpriv changes user in place; the supervisor's parent-death signal, which a change of
		# user clears, is kept.
		server=(setpriv --reuid=postgres --regid=postgres --init-groups --pdeathsig=keep "${server[@]}")
		# Opened by root below, the log stays the postgres user's, for pg_ctl's next start.
		touch "$dir/data/server.log"
		chown postgres: "$dir/data/server.log"
	fi
	exec "${server[@]}" >>"$dir/data/server.log" 2>&1
}

# postgres_ready DIR: the cluster accepts connections on the port in DIR/port.
postgres_ready() {
	local dir=$1 bin
	bin=$(postgres_bindir) || return 1
	"$bin/pg_isready" -q -h "$dir/data" -p "$(cat "$dir/port")"
}

postgres_stop() {
	local dir=$1 bin
	[ -s "$dir/data/PG_VERSION" ] || return 0
	bin=$(postgres_bindir) || return 0
	if as_postgres "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
	fi
}

redis_running() {
	local pidfile=$1/redis.pid
	[ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

# redis_socket DIR: the private Unix socket of the server in DIR, where the path fits a socket
# address (sun_path holds 107 bytes; a deeper DIR simply goes without the socket).
redis_socket() {
	local socket=$1/redis.sock
	[ "${#socket}" -ge 100 ] || echo "$socket"
}

# redis_configure DIR PORT [fast]: DIR/redis.conf, for a server on PORT that daemonizes (run it
# with `--daemonize no` to keep it in the foreground) and requires the password made on first
# use. `fast` keeps nothing on disk; otherwise Redis snapshots into DIR.
redis_configure() {
	local dir=$1 port=$2 mode=${3:-durable} socket socket_conf=
	if [ ! -s "$dir/password" ]; then
		(umask 077 && new_secret >"$dir/password")
	fi
	socket=$(redis_socket "$dir")
	if [ -n "$socket" ]; then
		socket_conf="unixsocket $socket
unixsocketperm 700"
	fi
	# The password stays out of the process list: it is only in this private file.
	(
		umask 077
		cat >"$dir/redis.conf" <<-CONF
			bind 127.0.0.1
			protected-mode yes
			port $port
			daemonize yes
			pidfile $dir/redis.pid
			logfile $dir/redis.log
			dir $dir
			requirepass $(cat "$dir/password")
			save $([ "$mode" = fast ] && echo '""' || echo '3600 1 300 100 60 10000')
			appendonly no
			$socket_conf
		CONF
	)
}

# redis_ready DIR PORT: the server in DIR answers on PORT.
redis_ready() {
	REDISCLI_AUTH=$(cat "$1/password") redis-cli -h 127.0.0.1 -p "$2" ping 2>/dev/null | grep -q PONG
}

# redis_provision DIR PORT: DIR/port and DIR/env, with REDIS_URL (TCP on loopback) and, where
# the server has its Unix socket, REDIS_CACHE_URL: the same server over that socket, a cheaper
# round trip for the per-request rate-limit count of a web process on this machine.
redis_provision() {
	local dir=$1 port=$2 password socket
	password=$(cat "$dir/password")
	socket=$(redis_socket "$dir")
	echo "$port" >"$dir/port"
	(
		umask 077
		{
			echo "REDIS_URL=redis://:$password@127.0.0.1:$port/0"
			[ -z "$socket" ] || echo "REDIS_CACHE_URL=unix://:$password@$socket?db=0"
		} >"$dir/env"
	)
}

# redis_start DIR [fast]: start a server in DIR, daemonized, on its last port if still free.
redis_start() {
	local dir=$1 mode=${2:-durable} port attempt tries
	command -v redis-server >/dev/null 2>&1 || die "redis-server not found (apt-get install redis-server)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if redis_running "$dir"; then
		[ -s "$dir/env" ] || die "a redis-server runs in $dir but $dir/env is missing"
		return 0
	fi
	for attempt in 1 2 3; do
		port=$(port_for "$dir")
		redis_configure "$dir" "$port" "$mode"
		rm -f "$dir/redis.pid"
		detached redis-server "$dir/redis.conf"
		for tries in $(seq 1 100); do
			if redis_ready "$dir" "$port"; then
				redis_provision "$dir" "$port"
				return 0
			fi
			if [ -s "$dir/redis.pid" ] && ! redis_running "$dir"; then
				break
			fi
			sleep 0.1
		done
		redis_stop "$dir"
		rm -f "$dir/port"
	done
	tail -n 20 "$dir/redis.log" >&2
	die "redis-server did not start"
}

# redis_run DIR: the server configured in DIR in the foreground (exec'd: a supervisor's child).
redis_run() {
	exec redis-server "$1/redis.conf" --daemonize no
}

redis_stop() {
	local dir=$1 pid tries
	redis_running "$dir" || return 0
	pid=$(cat "$dir/redis.pid")
	kill "$pid"
	for tries in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
}
