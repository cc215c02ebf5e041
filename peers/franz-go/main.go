// Command franzgo-peer runs a franz-go producer and consumer group for the tests, with
// KIP-714 client metrics on (franz-go's default), and prints one JSON object a line.
//
// Lines: "started"; "done" with the records produced or consumed; "closed" when a client
// was closed (franz-go sends its terminating push then); "error"; "exit" last. It stops
// after -duration, on a "stop" line or end of input on stdin, or on SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// emitter writes JSON lines; one at a time, so lines from goroutines never interleave.
type emitter struct {
	mu  sync.Mutex
	out io.Writer
}

func (e *emitter) emit(event string, kv ...any) {
	fields := map[string]any{"event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		fields[fmt.Sprint(kv[i])] = kv[i+1]
	}
	line, err := json.Marshal(fields)
	if err != nil {
		line = []byte(fmt.Sprintf(`{"event":"error","error":%q}`, err.Error()))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintln(e.out, string(line))
}

type options struct {
	bootstrap string
	clientID  string
	role      string
	topic     string
	group     string
	messages  int
	rate      float64
	duration  time.Duration
	close     bool
	logLevel  string
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("franzgo-peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.bootstrap, "bootstrap", "", "seed broker HOST:PORT (required)")
	fs.StringVar(&o.clientID, "client-id", "franz-peer", "client id base: ID-producer, ID-consumer")
	fs.StringVar(&o.role, "role", "both", "producer, consumer or both")
	fs.StringVar(&o.topic, "topic", "peer-topic", "topic produced to and consumed from")
	fs.StringVar(&o.group, "group", "franz-peer-group", "the consumer's group")
	fs.IntVar(&o.messages, "messages", 100, "records to produce (0: none)")
	fs.Float64Var(&o.rate, "rate", 50, "records per second at most")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: on stop/EOF on stdin, or SIGTERM)")
	fs.BoolVar(&o.close, "close", false, "close the clients at the end (a terminating push)")
	fs.StringVar(&o.logLevel, "log-level", "info", "franz-go's log level on stderr: error, warn, info, debug")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.bootstrap == "":
		return o, errors.New("-bootstrap is required")
	case o.role != "producer" && o.role != "consumer" && o.role != "both":
		return o, fmt.Errorf("-role takes producer, consumer or both, got %q", o.role)
	case o.messages < 0:
		return o, errors.New("-messages must not be negative")
	case !(o.rate > 0):
		return o, errors.New("-rate must be positive")
	case o.duration < 0:
		return o, errors.New("-duration must not be negative")
	}
	if _, err := logLevel(o.logLevel); err != nil {
		return o, err
	}
	return o, nil
}

func logLevel(name string) (kgo.LogLevel, error) {
	switch name {
	case "error":
		return kgo.LogLevelError, nil
	case "warn":
		return kgo.LogLevelWarn, nil
	case "info":
		return kgo.LogLevelInfo, nil
	case "debug":
		return kgo.LogLevelDebug, nil
	}
	return kgo.LogLevelNone, fmt.Errorf("-log-level takes error, warn, info or debug, got %q", name)
}

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "franzgo-peer:", err)
		}
		os.Exit(2)
	}
	out := &emitter{out: os.Stdout}
	os.Exit(run(o, out, os.Stdin))
}

func run(o options, out *emitter, stdin io.Reader) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // a "stop" line or the end of stdin ends the run
		buf := make([]byte, 256)
		for {
			n, err := stdin.Read(buf)
			if err != nil || (n >= 4 && string(buf[:4]) == "stop") {
				cancel()
				return
			}
		}
	}()

	level, _ := logLevel(o.logLevel)
	base := []kgo.Opt{
		kgo.SeedBrokers(o.bootstrap),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil)),
	}
	out.emit("started", "bootstrap", o.bootstrap, "role", o.role, "software_version", version())
	var wg sync.WaitGroup
	code := 0
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		code = 1
		mu.Unlock()
		out.emit("error", "error", err.Error())
	}
	if o.role != "consumer" {
		cl, err := kgo.NewClient(append(base, kgo.ClientID(o.clientID+"-producer"),
			kgo.DefaultProduceTopic(o.topic), kgo.AllowAutoTopicCreation())...)
		if err != nil {
			fail(err)
		} else {
			wg.Add(1)
			go func() { defer wg.Done(); produce(ctx, cl, o, out) }()
		}
	}
	if o.role != "producer" {
		cl, err := kgo.NewClient(append(base, kgo.ClientID(o.clientID+"-consumer"),
			kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(o.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation())...)
		if err != nil {
			fail(err)
		} else {
			wg.Add(1)
			go func() { defer wg.Done(); consume(ctx, cl, o, out) }()
		}
	}
	wg.Wait()
	out.emit("exit", "code", code)
	return code
}

func produce(ctx context.Context, cl *kgo.Client, o options, out *emitter) {
	var mu sync.Mutex
	acked, failed := 0, 0
	sent := 0
	began := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		for sent < o.messages && float64(sent) < time.Since(began).Seconds()*o.rate {
			record := &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", sent)), Value: []byte(fmt.Sprintf("value-%d", sent))}
			sent++
			cl.Produce(context.Background(), record, func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
				} else {
					acked++
				}
			})
		}
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
	}
	mu.Lock()
	out.emit("done", "role", "producer", "sent", sent, "acked", acked, "failed", failed)
	mu.Unlock()
	finish(cl, "producer", o, out)
}

func consume(ctx context.Context, cl *kgo.Client, o options, out *emitter) {
	consumed := 0
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				out.emit("error", "role", "consumer", "topic", topic, "partition", partition, "error", err.Error())
			}
		})
		consumed += fetches.NumRecords()
	}
	out.emit("done", "role", "consumer", "consumed", consumed)
	finish(cl, "consumer", o, out)
}

// finish closes the client (which sends franz-go's terminating push) only with -close.
func finish(cl *kgo.Client, role string, o options, out *emitter) {
	if !o.close {
		return
	}
	began := time.Now()
	cl.Close()
	out.emit("closed", "role", role, "seconds", time.Since(began).Seconds())
}

// version is the franz-go module version this program was built with (from its build info).
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == "github.com/twmb/franz-go" {
			return dep.Version
		}
	}
	return "unknown"
}
