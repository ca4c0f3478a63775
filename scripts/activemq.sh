#!/usr/bin/env bash
# Runs Apache ActiveMQ (Debian's package) as the cluster's STOMP broker on
# stomp://127.0.0.1:61613, with a minimal configuration of our own: STOMP only,
# nothing persisted, small heap. Usage: scripts/activemq.sh start|stop|status|restart|kill
# (kill: SIGKILL, a crash for failure tests)
#
# Debian's init script is not used: its default configuration has no STOMP connector,
# it sleeps 5 s and forces a 512 MB heap. We run the JVM ourselves and wait for a real
# STOMP CONNECTED.
#
# Authentication and authorization: with ACTIVEMQ_AUTH_FILE=FILE (lines "user password
# group"; '#' comments), anonymous access is refused and only users of group "tracker"
# may subscribe or publish to any topic, so nobody else can reach the cluster's topics.
# Other users may log in and do nothing else. Passwords: letters, digits, '-', '_', '.'.
#
# A redundant pair (a network of brokers): `scripts/activemq.sh pair-start|pair-stop`
# starts or stops two brokers, a on stomp://127.0.0.1:61623 and b on :61633, joined by a
# duplex network connector from a to b (OpenWire on 127.0.0.1:61634) that forwards
# topics both ways; give the nodes --broker stomp://127.0.0.1:61623,stomp://127.0.0.1:61633.
# ACTIVEMQ_PAIR=a|b selects one of them for start, stop, kill, status.
#
# A broker host's configuration (deploy/activemq, as docs/operating/deploy.md installs it): with
# ACTIVEMQ_DEPLOY_CONF=DIR (what /etc/activemq/tracker holds: activemq.xml,
# broker.properties, login.config, users.properties, broker.p12, …) the broker runs the
# ExecStart of ACTIVEMQ_UNIT (default deploy/activemq/activemq-tracker.service) with
# /etc/activemq/tracker read as DIR and /var/lib/activemq/tracker as ACTIVEMQ_STATE, and
# the probe speaks STOMP over TLS as the users.properties user "tracker".
#
# ACTIVEMQ_JVM=deploy: our own configuration, run with the deploy unit's JVM flags (heap,
# collector, full tiered compilation) instead of the tests' (C1 only); see jvm_flags.
set -euo pipefail

NAME="tracker"
NETWORK_LISTEN=""   # host:port of an OpenWire connector for a network peer to connect to
NETWORK_TO=""       # host:port of the broker to join with a duplex network connector
case "${ACTIVEMQ_PAIR:-}" in
    a) ACTIVEMQ_STATE=/tmp/tracker-activemq-a; ACTIVEMQ_STOMP_PORT=61623; NAME=tracker-a; NETWORK_TO=127.0.0.1:61634 ;;
    b) ACTIVEMQ_STATE=/tmp/tracker-activemq-b; ACTIVEMQ_STOMP_PORT=61633; NAME=tracker-b; NETWORK_LISTEN=127.0.0.1:61634 ;;
    '') ;;
    *) echo "activemq.sh: ACTIVEMQ_PAIR must be a or b" >&2; exit 2 ;;
esac
# Either end of a pair on other addresses than loopback's (a broker host each, as the
# nemesis's namespaces are): this broker listens for its peer, or joins it.
NETWORK_LISTEN="${ACTIVEMQ_NETWORK_LISTEN:-$NETWORK_LISTEN}"
NETWORK_TO="${ACTIVEMQ_NETWORK_TO:-$NETWORK_TO}"
STATE="${ACTIVEMQ_STATE:-/tmp/tracker-activemq}"
HOST="${ACTIVEMQ_STOMP_HOST:-127.0.0.1}"
PORT="${ACTIVEMQ_STOMP_PORT:-61613}"
AUTH_FILE="${ACTIVEMQ_AUTH_FILE:-}"
DEPLOY_CONF="${ACTIVEMQ_DEPLOY_CONF:-}"
UNIT="${ACTIVEMQ_UNIT:-$(dirname "$0")/../deploy/activemq/activemq-tracker.service}"
# A value of the deploy configuration's broker.properties.
deploy_property() { sed -n "s/^$1=//p" "$DEPLOY_CONF/broker.properties" | tail -n 1; }
SCHEME=stomp
if [ -n "$DEPLOY_CONF" ]; then
    SCHEME=stomp+ssl
    PORT=$(deploy_property tracker.stomp.port)
    [ -n "$PORT" ] || { echo "activemq.sh: no tracker.stomp.port in $DEPLOY_CONF/broker.properties" >&2; exit 2; }
fi
PIDFILE="$STATE/activemq.pid"
LOG="$STATE/activemq.log"

install_if_missing() {
    if [ ! -f /usr/share/activemq/bin/activemq.jar ] || ! command -v java >/dev/null; then
        echo "activemq.sh: installing Debian's activemq package" >&2
        local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq activemq >/dev/null
    fi
}

# The <plugins> element for ACTIVEMQ_AUTH_FILE, or nothing (an open broker).
auth_plugins() {
    [ -n "$AUTH_FILE" ] || return 0
    [ -r "$AUTH_FILE" ] || { echo "activemq.sh: cannot read ACTIVEMQ_AUTH_FILE $AUTH_FILE" >&2; return 1; }
    local users="" user password group
    while read -r user password group _; do
        case "$user" in ''|'#'*) continue ;; esac
        for v in "$user" "$password" "$group"; do
            [[ "$v" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "activemq.sh: bad entry for user '$user' in $AUTH_FILE (need: user password group)" >&2; return 1; }
        done
        users+="          <authenticationUser username=\"$user\" password=\"$password\" groups=\"$group\"/>"$'\n'
    done < "$AUTH_FILE"
    [ -n "$users" ] || { echo "activemq.sh: no users in $AUTH_FILE" >&2; return 1; }
    cat <<XML
    <plugins>
      <simpleAuthenticationPlugin anonymousAccessAllowed="false">
        <users>
$users        </users>
      </simpleAuthenticationPlugin>
      <authorizationPlugin>
        <map>
          <authorizationMap>
            <authorizationEntries>
              <authorizationEntry topic=">" read="tracker" write="tracker" admin="tracker"/>
              <authorizationEntry queue=">" read="tracker" write="tracker" admin="tracker"/>
            </authorizationEntries>
          </authorizationMap>
        </map>
      </authorizationPlugin>
    </plugins>
XML
}

# login/passcode headers for our own CONNECT probe: the first user of the file.
probe_credentials() {
    if [ -n "$DEPLOY_CONF" ]; then
        printf 'login:tracker\npasscode:%s\n' "$(sed -n 's/^tracker=//p' "$DEPLOY_CONF/users.properties")"
        return 0
    fi
    [ -n "$AUTH_FILE" ] || return 0
    awk '$1 !~ /^#/ && NF >= 2 { printf "login:%s\npasscode:%s\n", $1, $2; exit }' "$AUTH_FILE"
}

write_config() {
    # The configuration holds the broker's passwords: for this user only, whatever the
    # directory held before.
    umask 077
    mkdir -p "$STATE/conf" "$STATE/data"
    chmod 700 "$STATE" "$STATE/conf" "$STATE/data"
    local plugins; plugins=$(auth_plugins)
    # A network of brokers learns remote subscriptions from advisory messages.
    local advisory=false network="" openwire=""
    if [ -n "$NETWORK_TO" ] || [ -n "$NETWORK_LISTEN" ]; then advisory=true; fi
    [ -n "$NETWORK_LISTEN" ] && openwire="      <transportConnector name=\"network\" uri=\"tcp://$NETWORK_LISTEN?transport.tcpNoDelay=true\"/>"
    if [ -n "$NETWORK_TO" ]; then
        # Duplex: one connection carries both directions; TTL 1: no message crosses twice.
        # Conduit subscriptions: a topic message crosses once for all the remote broker's
        # subscribers. Without them it crossed once per remote subscriber, and each copy
        # went to every one of them: a node saw every frame of a node on the other broker
        # twice (dropped as replays: about one a second at rest, hundreds under load).
        network="    <networkConnectors>
      <networkConnector name=\"pair\" uri=\"static:(tcp://$NETWORK_TO?tcpNoDelay=true)?initialReconnectDelay=200&amp;maxReconnectDelay=1000&amp;useExponentialBackOff=false\"
                        duplex=\"true\" networkTTL=\"1\" conduitSubscriptions=\"true\"/>
    </networkConnectors>"
    fi
    cat > "$STATE/conf/activemq.xml" <<XML
<beans xmlns="http://www.springframework.org/schema/beans"
       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
       xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans.xsd
       http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="$NAME" useJmx="false"
          persistent="false" advisorySupport="$advisory" schedulerSupport="false" dataDirectory="$STATE/data">
    <systemUsage>
      <systemUsage>
        <memoryUsage><memoryUsage limit="64 mb"/></memoryUsage>
        <tempUsage><tempUsage limit="256 mb"/></tempUsage>
      </systemUsage>
    </systemUsage>
$plugins
$network
    <transportConnectors>
      <transportConnector name="stomp" uri="$SCHEME://$HOST:$PORT?transport.maxFrameSize=67108864&amp;transport.tcpNoDelay=true"/>
$openwire
    </transportConnectors>
  </broker>
</beans>
XML
    # Debian's broker logs through log4j 1.2 (slf4j-log4j12), found on the classpath.
    cat > "$STATE/conf/log4j.properties" <<PROPS
log4j.rootLogger=WARN, out
log4j.logger.org.apache.activemq.network=INFO
log4j.logger.org.apache.activemq.broker.TransportConnector=INFO
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d %-5p %c{1} - %m%n
PROPS
    cat > "$STATE/conf/log4j2.properties" <<PROPS
rootLogger.level=WARN
rootLogger.appenderRef.console.ref=Console
appender.console.type=Console
appender.console.name=Console
appender.console.layout.type=PatternLayout
appender.console.layout.pattern=%d %-5p %c{1} - %m%n
logger.amq.name=org.apache.activemq
logger.amq.level=INFO
PROPS
    # `cat >` keeps the mode of a file that existed before.
    chmod 600 "$STATE"/conf/*
}

pid() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && cat "$PIDFILE"; }

stomp_connected() {
    local creds frame='CONNECT\naccept-version:1.2\nhost:/\n'
    creds=$(probe_credentials)
    [ -n "$creds" ] && frame+="${creds//$'\n'/\\n}\\n"
    frame+='\n\0'
    if [ -n "$DEPLOY_CONF" ]; then
        # The probe only asks whether the broker answers; the nodes verify its certificate.
        # s_client waits for more until the timeout ends it: its status says nothing.
        local answer
        answer=$(printf "$frame" | timeout 3 openssl s_client -quiet -connect "$HOST:$PORT" 2>/dev/null | head -c 9 || true)
        [ "$answer" = CONNECTED ]
        return
    fi
    timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$PORT && printf '$frame' >&3 && head -c 9 <&3" 2>/dev/null | grep -q CONNECTED
}

# The unit's ExecStart, continuation lines joined, with the host's paths made the
# configuration's and the state directory's.
deploy_command() {
    [ -r "$UNIT" ] || { echo "activemq.sh: cannot read the unit $UNIT" >&2; return 1; }
    sed -n '/^ExecStart=/,/[^\\]$/p' "$UNIT" | sed -e 's/^ExecStart=//' -e 's/\\$//' | tr '\n' ' ' \
        | sed -e "s#/etc/activemq/tracker#$DEPLOY_CONF#g" -e "s#/var/lib/activemq/tracker#$STATE#g"
}

# The JVM's heap, collector and compiler. For tests, C1 only (-XX:TieredStopAtLevel=1):
# a broker that starts and stops many times a run compiles less. ACTIVEMQ_JVM=deploy
# takes them from the deploy unit's ExecStart (full tiered compilation, the heap an
# operator's broker has): the benchmark suite measures that broker.
jvm_flags() {
    case "${ACTIVEMQ_JVM:-test}" in
        test) echo "-Xms32m -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1" ;;
        deploy) local command; command=$(deploy_command) && tr ' ' '\n' <<< "$command" | grep -- '^-X' | tr '\n' ' ' ;;
        *) echo "activemq.sh: ACTIVEMQ_JVM must be test or deploy" >&2; return 1 ;;
    esac
}

start() {
    if p=$(pid); then
        if stomp_connected; then echo "activemq running (pid $p) on $SCHEME://$HOST:$PORT"; return 0; fi
    fi
    install_if_missing
    if [ -n "$DEPLOY_CONF" ]; then
        mkdir -p "$STATE"
        chmod 700 "$STATE"
        local command; command=$(deploy_command)
        # shellcheck disable=SC2086 # the unit's words, split as systemd splits them
        setsid $command >> "$LOG" 2>&1 < /dev/null &
        echo $! > "$PIDFILE"
        wait_connected
        return
    fi
    write_config
    local java; java=$(command -v java)
    local jvm; jvm=$(jvm_flags)
    # Then the JVM flags Debian's launcher passes on Java > 8.
    # shellcheck disable=SC2086 # jvm holds separate words
    setsid "$java" $jvm \
        --add-reads=java.xml=java.logging \
        --add-opens java.base/java.security=ALL-UNNAMED --add-opens java.base/java.net=ALL-UNNAMED \
        --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED \
        --add-opens java.naming/javax.naming.spi=ALL-UNNAMED --add-opens java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED \
        --add-opens java.base/java.util.concurrent=ALL-UNNAMED --add-opens java.base/java.util.concurrent.atomic=ALL-UNNAMED \
        -Dactivemq.classpath="$STATE/conf" -Dactivemq.home=/usr/share/activemq -Dactivemq.base="$STATE" \
        -Dactivemq.conf="$STATE/conf" -Dactivemq.data="$STATE/data" -Dlog4j2.configurationFile="$STATE/conf/log4j2.properties" \
        -jar /usr/share/activemq/bin/activemq.jar start "xbean:file:$STATE/conf/activemq.xml" \
        >> "$LOG" 2>&1 < /dev/null &
    echo $! > "$PIDFILE"
    wait_connected
}

wait_connected() {
    local deadline=$((SECONDS + ${ACTIVEMQ_START_TIMEOUT:-60}))
    while [ $SECONDS -lt $deadline ]; do
        if ! pid >/dev/null; then
            echo "activemq.sh: the broker exited while starting; last log lines:" >&2
            tail -n 20 "$LOG" >&2
            return 1
        fi
        if stomp_connected; then
            echo "activemq running (pid $(cat "$PIDFILE")) on $SCHEME://$HOST:$PORT"
            return 0
        fi
        sleep 0.2
    done
    echo "activemq.sh: no STOMP CONNECTED on $HOST:$PORT within ${ACTIVEMQ_START_TIMEOUT:-60} s; log: $LOG" >&2
    tail -n 20 "$LOG" >&2
    stop || true
    return 1
}

stop() {
    if p=$(pid); then
        kill "$p" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
        echo "activemq stopped (pid $p)"
    else
        echo "activemq not running"
    fi
    rm -f "$PIDFILE"
}

# A crash, for failure tests: SIGKILL, no shutdown of connections.
kill9() {
    if p=$(pid); then
        kill -9 "$p" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        echo "activemq killed (pid $p)"
    else
        echo "activemq not running"
    fi
    rm -f "$PIDFILE"
}

status() {
    if p=$(pid) && stomp_connected; then
        echo "activemq running (pid $p) on $SCHEME://$HOST:$PORT"
    else
        echo "activemq not running"; return 3
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    restart) stop; start ;;
    pair-start) ACTIVEMQ_PAIR=b "$0" start && ACTIVEMQ_PAIR=a "$0" start ;;
    pair-stop) ACTIVEMQ_PAIR=a "$0" stop; ACTIVEMQ_PAIR=b "$0" stop ;;
    kill) kill9 ;;
    status) status ;;
    *) echo "usage: $0 start|stop|restart|kill|status|pair-start|pair-stop" >&2; exit 2 ;;
esac
