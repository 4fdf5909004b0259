// kubelet_atomic_writer: the kubelet's own atomic writer (k8s.io/kubernetes/pkg/volume/util,
// atomic_writer.go of the Kubernetes source tree the real-Kubernetes tier builds, v1.20.2) driven
// by bench/atomicwriter_bench.cc over a pipe, so that one bench command alternates it with the
// project's writer round by round. Nothing of the kubelet is copied here: build.sh builds this
// file in GOPATH mode against that tree (tests/realkube/build_kube.sh's environment).
//
// Each write is what the kubelet's configMap volume plugin does for one volume update
// (pkg/volume/configmap, SetUpAt): volumeutil.NewAtomicWriter(dir, context), then
// writer.Write(payload) with its map[string]FileProjection. The payload map is built once per
// round, outside the clock, as the bench builds the project's.
//
// Protocol (stdin -> stdout, one request at a time):
//
//	payload <id> <files>\n, then per file "<mode, octal> <path bytes> <data bytes>\n<path><data>"
//	  -> "ok\n": payload <id> (0 or 1) holds exactly those bytes from now on
//	run <seconds> <changed: 0|1> <dir>\n
//	  -> "ok <writes> <ns inside writes> <ns elapsed> <ns CPU>\n" or "error <text>\n"
//
// A run makes one write of payload 0 into <dir> (which exists) outside the clock, then writes,
// until <seconds> passed and at least 3 times, payload 1 and 0 in turn (write i: 1 when i is
// even) when <changed> is 1, else payload 0 each time (which must then publish nothing: ..data
// is the same link after the run). CPU is the process's (getrusage: every thread, the Go
// runtime's and its collector's included), elapsed the run's wall time.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func readPayload(in *bufio.Reader, files int) (map[string]volumeutil.FileProjection, error) {
	p := make(map[string]volumeutil.FileProjection, files)
	for i := 0; i < files; i++ {
		line, err := in.ReadString('\n')
		if err != nil {
			return nil, err
		}
		var mode, pathLen, dataLen int
		if _, err := fmt.Sscanf(line, "%o %d %d", &mode, &pathLen, &dataLen); err != nil {
			return nil, fmt.Errorf("file header %q: %v", line, err)
		}
		buf := make([]byte, pathLen+dataLen)
		if _, err := io.ReadFull(in, buf); err != nil {
			return nil, err
		}
		p[string(buf[:pathLen])] = volumeutil.FileProjection{Data: buf[pathLen:], Mode: int32(mode)}
	}
	return p, nil
}

// One volume update as the configMap plugin makes it.
func write(dir string, payload map[string]volumeutil.FileProjection) error {
	w, err := volumeutil.NewAtomicWriter(dir, "pod bench/bench volume bench")
	if err != nil {
		return err
	}
	return w.Write(payload)
}

func run(dir string, seconds float64, changed bool, payloads [2]map[string]volumeutil.FileProjection) (string, error) {
	if payloads[0] == nil || payloads[1] == nil {
		return "", fmt.Errorf("payloads not sent")
	}
	if err := write(dir, payloads[0]); err != nil {
		return "", fmt.Errorf("first write: %v", err)
	}
	before, err := os.Readlink(dir + "/..data")
	if err != nil {
		return "", err
	}
	runtime.GC() // every round starts with the same heap
	cpu0 := cpuNanos()
	start := time.Now()
	var inside time.Duration
	n := 0
	for {
		p := payloads[0]
		if changed && n%2 == 0 {
			p = payloads[1]
		}
		t0 := time.Now()
		if err := write(dir, p); err != nil {
			return "", fmt.Errorf("write %d: %v", n, err)
		}
		inside += time.Since(t0)
		n++
		if time.Since(start).Seconds() >= seconds && n >= 3 {
			break
		}
	}
	elapsed := time.Since(start)
	cpu := cpuNanos() - cpu0
	if !changed {
		after, err := os.Readlink(dir + "/..data")
		if err != nil || after != before {
			return "", fmt.Errorf("an unchanged write published: ..data %s -> %s (%v)", before, after, err)
		}
	}
	return fmt.Sprintf("ok %d %d %d %d", n, inside.Nanoseconds(), elapsed.Nanoseconds(), cpu), nil
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	var payloads [2]map[string]volumeutil.FileProjection
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return // the bench closed the pipe
		}
		line = strings.TrimSuffix(line, "\n")
		f := strings.SplitN(line, " ", 4) // a run's dir is the rest of the line
		reply := ""
		switch {
		case len(f) == 3 && f[0] == "payload":
			id, err1 := strconv.Atoi(f[1])
			files, err2 := strconv.Atoi(f[2])
			if err1 != nil || err2 != nil || id < 0 || id > 1 {
				reply = "error bad payload request"
				break
			}
			p, err := readPayload(in, files)
			if err != nil {
				fmt.Fprintf(out, "error payload: %v\n", err)
				out.Flush()
				return // the stream is out of step
			}
			payloads[id] = p
			reply = "ok"
		case len(f) == 4 && f[0] == "run":
			seconds, err1 := strconv.ParseFloat(f[1], 64)
			if err1 != nil {
				reply = "error bad seconds"
				break
			}
			r, err := run(f[3], seconds, f[2] == "1", payloads)
			if err != nil {
				reply = "error " + strings.ReplaceAll(err.Error(), "\n", " ")
			} else {
				reply = r
			}
		default:
			reply = "error unknown request"
		}
		fmt.Fprintln(out, reply)
		out.Flush()
	}
}
