"""Drives Apache's RocketMQ C++ client 2.x (librocketmq.so) for the e2e suite.

The library ships in the PyPI package rocketmq-python-cvs, installed by
scripts/install-cpp-client.sh into target/cpp-client/venv; run this file with
that venv's python. It calls the library's C API through the package's ctypes
bindings (rocketmq.ffi.dll), declaring the few functions those bindings
leave out, so that what reaches the broker is exactly what the C++ client
sends.

Subcommands (every loop is bounded in count and time):

  produce --namesrv ADDR --topic T --count N [--tag X] [--keys K]
          [--delay-level L] [--body-prefix P] [--shard ARG]
          [--access-key AK --secret-key SK]
      Sends N messages with SendMessageSync (SendMessageOrderly with a
      selector picking queue ARG % queues when --shard is given); body i is
      P + i. One JSON line per message: {"event": "sent", "i", "msg_id",
      "status", "offset"} or {"event": "send_error", "i", "error"}; then
      {"event": "done", "sent", "failed"}. Exit 0 when every send was SEND_OK.

  transact --namesrv ADDR --topic T --count N [--outcome O]
           [--check-outcome O] [--linger S [--expect-checks K]]
      Sends N transactional messages with a transaction producer
      (CreateTransactionProducer, SendMessageTransaction); body i is P + i.
      The local transaction of message i answers commit, rollback or unknown
      as --outcome says (alternate: commit for even i, rollback for odd);
      a check from the broker is answered as --check-outcome says (default
      unknown), with i read from the checked body. One JSON line per
      message: {"event": "sent", "i", "msg_id", "status", "offset",
      "outcome"} or {"event": "send_error", "i", "error"}; one per check:
      {"event": "checked", "i", "answer"}. With --linger, the producer stays
      up after its sends until K distinct messages (default N; also those
      another producer of the group sent) were checked at least once or S
      seconds passed. Then {"event": "done", "sent", "failed", "checked"}.

  push --namesrv ADDR --group G --topic T --expect N --timeout S
       [--tag EXPR] [--orderly] [--broadcast] [--from-first]
       [--fail-body SUBSTR [--fail-times K]] [--hold]
       [--access-key AK --secret-key SK]
      A push consumer (clustering unless --broadcast; concurrent unless
      --orderly). Prints {"event": "started"} once started, then one line per
      delivery: {"event": "message", topic, tags, keys, body, msg_id,
      queue_id, queue_offset, reconsume_times, born_ms, store_ms,
      received_ms, status, properties}. With --fail-body, a delivery whose
      body contains SUBSTR is answered RECONSUME_LATER while its reconsume
      times are below K (default 1). Stops after N deliveries answered
      CONSUME_SUCCESS (with --hold: once stdin closes) or after S seconds,
      then prints {"event": "done", "consumed", "deliveries", "timed_out"}.

With --access-key and --secret-key, produce and push sign every request
with them (SetProducerSessionCredentials / SetPushConsumerSessionCredentials,
the C++ client's session credentials, with an empty channel), as RocketMQ's
ACL checks them.

Exit codes: 0 done, 2 push ended before N, 3 the client did not start,
4 some sends failed, 64 bad arguments.

The C++ client writes its log into --log-dir and a broadcasting consumer
its offsets under $HOME/.rocketmq_offsets/; the suite gives every run its
own HOME.
"""

import argparse
import ctypes
import json
import os
import sys
import threading
import time

EXIT_OK = 0
EXIT_TIMEOUT = 2
EXIT_START_FAILED = 3
EXIT_SEND_FAILED = 4
EXIT_USAGE = 64

# How long shutting the client down may take before the process exits anyway.
SHUTDOWN_LIMIT_S = 15.0
# Upper bounds on what a run may ask for.
MAX_COUNT = 100_000
MAX_TIMEOUT_S = 600.0

# Message properties printed with each delivery (when present).
PROPERTIES = (
    "UNIQ_KEY",
    "DELAY",
    "RETRY_TOPIC",
    "ORIGIN_MESSAGE_ID",
    "REAL_TOPIC",
    "REAL_QID",
    "RECONSUME_TIME",
    "MAX_RECONSUME_TIMES",
)

# Log levels of the C API (CLogLevel).
LOG_LEVELS = {"fatal": 1, "error": 2, "warn": 3, "info": 4, "debug": 5, "trace": 6}

# C API answers and enums (CCommon.h, CMessageExt.h, ConsumeType.h).
C_OK = 0
CONSUME_SUCCESS = 0
RECONSUME_LATER = 1
BROADCASTING = 0
CLUSTERING = 1
CONSUME_FROM_FIRST_OFFSET = 4
# CTransactionStatus.h.
TRANSACTION_STATUS = {"commit": 0, "rollback": 1, "unknown": 2}
SEND_STATUS = {0: "SEND_OK", 1: "FLUSH_DISK_TIMEOUT", 2: "FLUSH_SLAVE_TIMEOUT", 3: "SLAVE_NOT_AVAILABLE"}

_out_lock = threading.Lock()


def emit(**fields):
    """Writes one JSON line to stdout."""
    line = json.dumps(fields, sort_keys=True)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def now_ms():
    return int(time.time() * 1000)


def text(value):
    if value is None:
        return None
    return value.decode("utf-8", "replace")


def load_library(log_dir):
    """The library with every function this driver calls declared.

    The library reads ROCKETMQ_CLIENT_LOG_DIR once, when it logs first; this
    build writes to /logs/rocketmq-client/ without it.
    """
    os.makedirs(log_dir, exist_ok=True)
    os.environ["ROCKETMQ_CLIENT_LOG_DIR"] = log_dir
    from rocketmq import ffi

    dll = ffi.dll
    vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    dll.ShowProducerVersion.argtypes = [vp]
    dll.ShowProducerVersion.restype = cp
    dll.ShowPushConsumerVersion.argtypes = [vp]
    dll.ShowPushConsumerVersion.restype = cp
    dll.SetProducerLogLevel.argtypes = [vp, ci]
    dll.SetPushConsumerLogLevel.argtypes = [vp, ci]
    dll.SetPushConsumerMessageModel.argtypes = [vp, ci]
    # Declared by rocketmq.ffi already; repeated so that the driver does not
    # depend on that.
    dll.SetProducerSessionCredentials.argtypes = [vp, cp, cp, cp]
    dll.SetProducerSessionCredentials.restype = ci
    dll.SetPushConsumerSessionCredentials.argtypes = [vp, cp, cp, cp]
    dll.SetPushConsumerSessionCredentials.restype = ci
    # The C API has no setter for where a new consumer starts (it fixes
    # CONSUME_FROM_LAST_OFFSET); the handle is a DefaultMQPushConsumer, so
    # its C++ setter is called directly.
    set_from = getattr(dll, "_ZN8rocketmq21DefaultMQPushConsumer19setConsumeFromWhereENS_16ConsumeFromWhereE")
    set_from.argtypes = [vp, ci]
    set_from.restype = None
    return ffi, dll, set_from


def check(dll, what, status):
    if status != C_OK:
        raise RuntimeError(f"{what}: status {int(status)}: {text(dll.GetLatestErrorMessage())}")


def start_producer(dll, producer, args, made_by):
    """Configures and starts a producer `made_by` returned; prints
    {"event": "started"} or {"event": "start_error"} and says which."""
    if not producer:
        emit(event="start_error", error=f"{made_by} returned null")
        return False
    try:
        check(dll, "SetProducerNameServerAddress", dll.SetProducerNameServerAddress(producer, args.namesrv.encode()))
        check(dll, "SetProducerSendMsgTimeout", dll.SetProducerSendMsgTimeout(producer, args.send_timeout_ms))
        check(dll, "SetProducerLogLevel", dll.SetProducerLogLevel(producer, LOG_LEVELS[args.log_level]))
        # transact has no credential flags.
        if getattr(args, "access_key", None) is not None:
            check(dll, "SetProducerSessionCredentials", dll.SetProducerSessionCredentials(
                producer, args.access_key.encode(), args.secret_key.encode(), b""))
        check(dll, "StartProducer", dll.StartProducer(producer))
    except RuntimeError as e:
        emit(event="start_error", error=str(e))
        return False
    emit(event="started", version=text(dll.ShowProducerVersion(producer)))
    return True


def send_each(ffi, dll, args, deadline, send_one):
    """Sends args.count messages to args.topic, body i being args.body_prefix
    + i, until `deadline` (time.monotonic()); send_one(i, msg, result) sets
    the rest of message i, sends it into the CSendResult pointer `result`
    and returns the extra fields of its "sent" line. Prints a "sent" or
    "send_error" line per message; returns (sent, failed)."""
    sent = failed = 0
    for i in range(args.count):
        if time.monotonic() >= deadline:
            emit(event="send_error", i=i, error=f"not sent: the run's {args.timeout} s are over")
            failed += args.count - i
            break
        msg = dll.CreateMessage(args.topic.encode())
        try:
            body = f"{args.body_prefix}{i}".encode()
            check(dll, "SetByteMessageBody", dll.SetByteMessageBody(msg, body, len(body)))
            result = ffi._CSendResult()
            extra = send_one(i, msg, ctypes.pointer(result))
            name = SEND_STATUS.get(result.sendStatus, str(result.sendStatus))
            emit(event="sent", i=i, msg_id=text(result.msgId), status=name, offset=result.offset, **extra)
            if name == "SEND_OK":
                sent += 1
            else:
                failed += 1
        except RuntimeError as e:
            emit(event="send_error", i=i, error=str(e))
            failed += 1
        finally:
            dll.DestroyMessage(msg)
    return sent, failed


def produce(args):
    ffi, dll, _ = load_library(args.log_dir)
    producer = dll.CreateProducer(args.group.encode())
    if not start_producer(dll, producer, args, "CreateProducer"):
        return EXIT_START_FAILED

    shard = ctypes.c_int(args.shard if args.shard is not None else 0)

    @ffi.QUEUE_SELECTOR_CALLBACK
    def select(size, _msg, arg):
        return ctypes.cast(arg, ctypes.POINTER(ctypes.c_int))[0] % size

    def send_one(i, msg, result):
        if args.tag:
            check(dll, "SetMessageTags", dll.SetMessageTags(msg, args.tag.encode()))
        if args.keys:
            keys = args.keys.replace("{i}", str(i))
            check(dll, "SetMessageKeys", dll.SetMessageKeys(msg, keys.encode()))
        if args.delay_level:
            check(dll, "SetDelayTimeLevel", dll.SetDelayTimeLevel(msg, args.delay_level))
        if args.shard is None:
            status = dll.SendMessageSync(producer, msg, result)
        else:
            status = dll.SendMessageOrderly(
                producer, msg, select, ctypes.cast(ctypes.pointer(shard), ctypes.c_void_p), 1, result)
        check(dll, "send", status)
        return {"sent_ms": now_ms()}

    sent, failed = send_each(ffi, dll, args, time.monotonic() + args.timeout, send_one)
    emit(event="done", sent=sent, failed=failed)
    code = EXIT_OK if failed == 0 else EXIT_SEND_FAILED
    shutdown_bounded(lambda: dll.ShutdownProducer(producer), code)
    return code


def outcome_of(outcome, i):
    """What the local transaction of message i answers."""
    if outcome == "alternate":
        return "commit" if i % 2 == 0 else "rollback"
    return outcome


def transact(args):
    ffi, dll, _ = load_library(args.log_dir)
    vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    callback = ctypes.CFUNCTYPE(ci, vp, vp, vp)
    dll.CreateTransactionProducer.argtypes = [cp, callback, vp]
    dll.CreateTransactionProducer.restype = vp
    dll.SendMessageTransaction.argtypes = [vp, vp, callback, vp, ctypes.POINTER(ffi._CSendResult)]
    dll.SendMessageTransaction.restype = ci

    checked = set()
    checked_lock = threading.Lock()

    @callback
    def check_local(_producer, msg, _data):
        body = text(dll.GetMessageBody(msg)) or ""
        i = int(body[len(args.body_prefix):]) if body.startswith(args.body_prefix) else -1
        answer = outcome_of(args.check_outcome, i) if i >= 0 else "unknown"
        with checked_lock:
            checked.add(i)
        emit(event="checked", i=i, answer=answer)
        return TRANSACTION_STATUS[answer]

    current = {"i": 0}

    @callback
    def execute_local(_producer, _msg, _data):
        return TRANSACTION_STATUS[outcome_of(args.outcome, current["i"])]

    producer = dll.CreateTransactionProducer(args.group.encode(), check_local, None)
    if not start_producer(dll, producer, args, "CreateTransactionProducer"):
        return EXIT_START_FAILED

    def send_one(i, msg, result):
        current["i"] = i
        check(dll, "SendMessageTransaction",
              dll.SendMessageTransaction(producer, msg, execute_local, None, result))
        return {"outcome": outcome_of(args.outcome, i)}

    deadline = time.monotonic() + args.timeout
    sent, failed = send_each(ffi, dll, args, deadline, send_one)
    linger_end = min(deadline, time.monotonic() + args.linger)
    expect_checks = args.count if args.expect_checks is None else args.expect_checks
    while time.monotonic() < linger_end:
        with checked_lock:
            if len(checked) >= expect_checks:
                break
        time.sleep(0.1)
    with checked_lock:
        n_checked = len(checked)
    emit(event="done", sent=sent, failed=failed, checked=n_checked)
    code = EXIT_OK if failed == 0 else EXIT_SEND_FAILED
    shutdown_bounded(lambda: dll.ShutdownProducer(producer), code)
    return code


def push(args):
    ffi, dll, set_from = load_library(args.log_dir)
    consumer = dll.CreatePushConsumer(args.group.encode())
    if not consumer:
        emit(event="start_error", error="CreatePushConsumer returned null")
        return EXIT_START_FAILED

    state = {"consumed": 0, "deliveries": 0}
    # Set when the run should end: --expect reached (unless --hold), or
    # stdin closed (with --hold).
    stop = threading.Event()
    lock = threading.Lock()
    # Deliveries may begin before StartPushConsumer returns; their lines
    # wait until "started" is out, which readers expect first.
    announced = threading.Event()

    def on_message(_consumer, msg):
        received = now_ms()
        body = text(dll.GetMessageBody(msg)) or ""
        reconsume = dll.GetMessageReconsumeTimes(msg)
        fail = args.fail_body is not None and args.fail_body in body and reconsume < args.fail_times
        props = {}
        for name in PROPERTIES:
            value = text(dll.GetMessageProperty(msg, name.encode()))
            if value:
                props[name] = value
        fields = dict(
            event="message",
            topic=text(dll.GetMessageTopic(msg)),
            tags=text(dll.GetMessageTags(msg)),
            keys=text(dll.GetMessageKeys(msg)),
            body=body,
            msg_id=text(dll.GetMessageId(msg)),
            queue_id=dll.GetMessageQueueId(msg),
            queue_offset=dll.GetMessageQueueOffset(msg),
            reconsume_times=reconsume,
            born_ms=dll.GetMessageBornTimestamp(msg),
            store_ms=dll.GetMessageStoreTimestamp(msg),
            received_ms=received,
            status="RECONSUME_LATER" if fail else "CONSUME_SUCCESS",
            properties=props,
        )
        # Printed before it is counted, so that the line of the delivery
        # that completes the run is out before "done".
        announced.wait()
        with lock:
            emit(**fields)
            state["deliveries"] += 1
            if not fail:
                state["consumed"] += 1
                if state["consumed"] >= args.expect and not args.hold:
                    stop.set()
        return RECONSUME_LATER if fail else CONSUME_SUCCESS

    callback = ffi.MSG_CALLBACK_FUNC(on_message)
    model = BROADCASTING if args.broadcast else CLUSTERING
    try:
        check(dll, "SetPushConsumerNameServerAddress",
              dll.SetPushConsumerNameServerAddress(consumer, args.namesrv.encode()))
        check(dll, "SetPushConsumerLogLevel", dll.SetPushConsumerLogLevel(consumer, LOG_LEVELS[args.log_level]))
        check(dll, "SetPushConsumerMessageModel", dll.SetPushConsumerMessageModel(consumer, model))
        check(dll, "SetPushConsumerThreadCount", dll.SetPushConsumerThreadCount(consumer, args.threads))
        if args.from_first:
            set_from(consumer, CONSUME_FROM_FIRST_OFFSET)
        if args.access_key is not None:
            check(dll, "SetPushConsumerSessionCredentials", dll.SetPushConsumerSessionCredentials(
                consumer, args.access_key.encode(), args.secret_key.encode(), b""))
        check(dll, "Subscribe", dll.Subscribe(consumer, args.topic.encode(), args.tag.encode()))
        if args.orderly:
            check(dll, "RegisterMessageCallbackOrderly", dll.RegisterMessageCallbackOrderly(consumer, callback))
        else:
            check(dll, "RegisterMessageCallback", dll.RegisterMessageCallback(consumer, callback))
        check(dll, "StartPushConsumer", dll.StartPushConsumer(consumer))
    except RuntimeError as e:
        emit(event="start_error", error=str(e))
        announced.set()
        return EXIT_START_FAILED
    emit(event="started", version=text(dll.ShowPushConsumerVersion(consumer)),
         model="BROADCASTING" if args.broadcast else "CLUSTERING", orderly=args.orderly)
    announced.set()

    if args.hold:
        def watch_stdin():
            for _ in sys.stdin:
                pass
            stop.set()
        threading.Thread(target=watch_stdin, daemon=True).start()
    stop.wait(args.timeout)
    with lock:
        finished = state["consumed"] >= args.expect
    code = EXIT_OK if finished else EXIT_TIMEOUT
    # Holding the lock to the end keeps later deliveries from printing after
    # "done". No ShutdownPushConsumer: in this build (2.1.0_cvs) it first
    # shuts the message-trace producer down without checking that there is
    # one, and crashes with SIGSEGV when trace is off. The broker sees the
    # connection close instead of UNREGISTER_CLIENT; offsets were committed
    # every 5 s.
    with lock:
        emit(event="done", consumed=state["consumed"], deliveries=state["deliveries"],
             timed_out=not stop.is_set())
        sys.stdout.flush()
        os._exit(code)


def shutdown_bounded(shutdown, code):
    """Shuts the client down, giving up after SHUTDOWN_LIMIT_S; then exits.

    The process ends with os._exit: the library's own threads and static
    destructors are not waited for, and the exit code is the run's.
    """
    worker = threading.Thread(target=shutdown, daemon=True)
    worker.start()
    worker.join(SHUTDOWN_LIMIT_S)
    if worker.is_alive():
        emit(event="shutdown_timeout", limit_s=SHUTDOWN_LIMIT_S)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def bounded_int(low, high):
    def parse(value):
        n = int(value)
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"{n} is not in {low}..{high}")
        return n
    return parse


def bounded_seconds(value):
    s = float(value)
    if not 0 < s <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{s} is not in (0, {MAX_TIMEOUT_S}]")
    return s


def bounded_linger(value):
    s = float(value)
    if not 0 <= s <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{s} is not in [0, {MAX_TIMEOUT_S}]")
    return s


def default_log_dir():
    return os.environ.get("ROCKETMQ_CLIENT_LOG_DIR") or os.path.join(
        os.path.expanduser("~"), "logs", "rocketmq-client")


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    def common(s):
        s.add_argument("--namesrv", required=True, help="name server, host:port")
        s.add_argument("--topic", required=True)
        s.add_argument("--log-level", choices=sorted(LOG_LEVELS), default="info",
                       help="the C++ client's log level")
        s.add_argument("--log-dir", default=default_log_dir(),
                       help="where the C++ client writes PID_rocketmq-cpp.log.N "
                            "(default: $ROCKETMQ_CLIENT_LOG_DIR, else $HOME/logs/rocketmq-client)")

    def credentials(s):
        s.add_argument("--access-key", help="sign every request as this user (with --secret-key)")
        s.add_argument("--secret-key", help="the secret key of --access-key")

    s = sub.add_parser("produce", help="send N messages synchronously")
    common(s)
    s.add_argument("--group", default="cpp-e2e-producer", help="producer group")
    s.add_argument("--count", type=bounded_int(1, MAX_COUNT), required=True)
    s.add_argument("--tag")
    s.add_argument("--keys", help="KEYS of each message; {i} becomes the message's index")
    s.add_argument("--delay-level", type=bounded_int(0, 18), default=0)
    s.add_argument("--body-prefix", default="cpp-")
    s.add_argument("--shard", type=bounded_int(0, 1 << 30),
                   help="send every message to queue SHARD %% queues (SendMessageOrderly)")
    s.add_argument("--send-timeout-ms", type=bounded_int(100, 60_000), default=3000)
    s.add_argument("--timeout", type=bounded_seconds, default=120.0, help="limit on the whole run, seconds")
    credentials(s)

    s = sub.add_parser("transact", help="send N transactional messages")
    common(s)
    s.add_argument("--group", default="cpp-e2e-transactions", help="producer group")
    s.add_argument("--count", type=bounded_int(1, MAX_COUNT), required=True)
    s.add_argument("--outcome", choices=["commit", "rollback", "unknown", "alternate"], default="alternate",
                   help="what each local transaction answers")
    s.add_argument("--check-outcome", choices=["commit", "rollback", "unknown", "alternate"], default="unknown",
                   help="what a check from the broker is answered")
    s.add_argument("--linger", type=bounded_linger, default=0.0,
                   help="seconds to stay up after the sends, until every message was checked")
    s.add_argument("--expect-checks", type=bounded_int(1, MAX_COUNT), default=None,
                   help="distinct messages to be checked before the linger ends (default --count)")
    s.add_argument("--body-prefix", default="cpp-tx-")
    s.add_argument("--send-timeout-ms", type=bounded_int(100, 60_000), default=3000)
    s.add_argument("--timeout", type=bounded_seconds, default=120.0, help="limit on the whole run, seconds")

    s = sub.add_parser("push", help="consume with a push consumer")
    common(s)
    s.add_argument("--group", required=True, help="consumer group")
    s.add_argument("--tag", default="*", help="subscription expression")
    s.add_argument("--expect", type=bounded_int(1, MAX_COUNT), required=True,
                   help="stop after this many deliveries answered CONSUME_SUCCESS")
    s.add_argument("--timeout", type=bounded_seconds, required=True, help="stop after this many seconds")
    s.add_argument("--orderly", action="store_true", help="orderly listener (RegisterMessageCallbackOrderly)")
    s.add_argument("--broadcast", action="store_true", help="BROADCASTING message model")
    s.add_argument("--from-first", action="store_true",
                   help="a new consumer starts at each queue's first offset (CONSUME_FROM_FIRST_OFFSET)")
    s.add_argument("--hold", action="store_true",
                   help="go on consuming after --expect until stdin closes (or --timeout)")
    s.add_argument("--threads", type=bounded_int(1, 64), default=2, help="consume threads")
    s.add_argument("--fail-body", help="answer RECONSUME_LATER for bodies containing this")
    s.add_argument("--fail-times", type=bounded_int(1, 16), default=1,
                   help="fail such a delivery while its reconsume times are below this")
    credentials(s)
    return p


def main(argv):
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else EXIT_OK
    if args.command in ("produce", "push") and (args.access_key is None) != (args.secret_key is None):
        sys.stderr.write("--access-key and --secret-key go together\n")
        return EXIT_USAGE
    if args.command == "produce":
        return produce(args)
    if args.command == "transact":
        return transact(args)
    return push(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
