package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseDefaultsAndEveryFlag(t *testing.T) {
	o, err := parse([]string{"-bootstrap", "h:1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.role != "both" || o.messages != 100 || o.close || o.clientID != "franz-peer" {
		t.Fatalf("defaults: %+v", o)
	}
	o, err = parse([]string{"-bootstrap", "h:1", "-role", "producer", "-messages", "0",
		"-rate", "2.5", "-duration", "3s", "-close", "-client-id", "c", "-log-level", "debug"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.role != "producer" || o.messages != 0 || o.rate != 2.5 || o.duration != 3*time.Second || !o.close || o.clientID != "c" {
		t.Fatalf("flags: %+v", o)
	}
}

func TestParseRefusesBadCommandLines(t *testing.T) {
	for want, args := range map[string][]string{
		"-bootstrap is required": {},
		"-role takes producer":   {"-bootstrap", "h:1", "-role", "admin"},
		"-messages must not be":  {"-bootstrap", "h:1", "-messages", "-1"},
		"-rate must be positive": {"-bootstrap", "h:1", "-rate", "0"},
		"unexpected argument":    {"-bootstrap", "h:1", "extra"},
		"-log-level takes error": {"-bootstrap", "h:1", "-log-level", "loud"},
		"-duration must not be":  {"-bootstrap", "h:1", "-duration", "-1s"},
	} {
		if _, err := parse(args, io.Discard); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want %q", args, err, want)
		}
	}
}

func TestEmitWritesOneJSONObjectALine(t *testing.T) {
	var buf bytes.Buffer
	e := &emitter{out: &buf}
	e.emit("done", "role", "producer", "sent", 3)
	e.emit("error", "error", "a \"quoted\"\nline")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if first["event"] != "done" || first["role"] != "producer" || first["sent"] != 3.0 {
		t.Fatalf("first: %v", first)
	}
	if second["error"] != "a \"quoted\"\nline" {
		t.Fatalf("second: %v", second)
	}
}

func TestRunStopsOnStdinWithoutABroker(t *testing.T) {
	// No broker listens on port 1: the clients retry until "stop" ends the run cleanly.
	var buf bytes.Buffer
	o, err := parse([]string{"-bootstrap", "127.0.0.1:1", "-messages", "0", "-close", "-log-level", "error"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int)
	go func() { done <- run(o, &emitter{out: &buf}, strings.NewReader("stop\n")) }()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, buf.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop")
	}
	for _, want := range []string{`"event":"started"`, `"event":"closed"`, `"event":"exit"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("missing %s in %s", want, buf.String())
		}
	}
}
