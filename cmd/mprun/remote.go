package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ethervia/ethervia/internal/localaddr"
	"github.com/ethervia/ethervia/mplite/pmi"
)

// checkRemote checks the options of a -hostfile job: the testbed's
// switch features do not apply to real hosts.
func (o options) checkRemote() error {
	switch {
	case o.nics != 1 || o.rate != "" || o.hostRate != "" || o.duplex || o.faulty() || o.flap != "" || o.railDown != "" || o.discover:
		return errors.New("mprun: -hostfile runs on real hosts: -nics, -rate, -host-rate, -duplex, faults, -flap, -rail-down and -discover are testbed options (give each rank MPLITE_IFACES with -genv for several rails)")
	case strings.TrimSpace(o.launcher) == "":
		return errors.New("mprun: -launcher is empty")
	}
	return nil
}

// remoteJob runs the ranks on the hosts of a hostfile, each started as
// "LAUNCHER HOST COMMAND" (ssh, as Hydra does), and serves them PMI-1 over
// TCP: a rank gets PMI_PORT, mprun's address as seen from its host, and
// PMI_ID, and learns everything else there (rank, job, interface, the
// peers' addresses). Ranks placed on one host get their endpoint and the
// host's rank count (MPLITE_ENDPOINT, MPLITE_LOCAL_SIZE).
func remoteJob(ctx context.Context, o options, stdout, stderr io.Writer) error {
	f, err := os.Open(o.hostfile)
	if err != nil {
		return fmt.Errorf("mprun: %w", err)
	}
	hosts, err := parseHostfile(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("mprun: %s: %w", o.hostfile, err)
	}
	placement := place(hosts, o.np, o.ppn)
	// Ranks of one host share its NICs, each with an endpoint of its own.
	local, onHost := make([]int, o.np), map[string]int{}
	for r, h := range placement {
		local[r] = onHost[h]
		onHost[h]++
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("mprun: job id: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	srv, err := pmi.NewServer(pmi.ServerConfig{Size: o.np, JobID: fmt.Sprintf("mprun-%d-%s", os.Getpid(), hex.EncodeToString(id[:])),
		OnAbort: func(rank, code int, text string) {
			cancel(fmt.Errorf("rank %d aborted the job (code %d) %s", rank, code, text))
		}})
	if err != nil {
		return fmt.Errorf("mprun: %w", err)
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return fmt.Errorf("mprun: PMI listener: %w", err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("mprun: %w", err)
	}
	launcher := strings.Fields(o.launcher)
	addrs := map[string]string{}
	failed := supervise(ctx, o, func(r int) (*exec.Cmd, func(*exec.Cmd) error) {
		host := placement[r]
		return exec.Command(launcher[0]), func(cmd *exec.Cmd) error {
			addr, ok := addrs[host]
			if !ok {
				a, err := addressToward(ctx, host)
				if err != nil {
					return err
				}
				addr, addrs[host] = a, a
			}
			// No secret on the command line: rank 0 draws the job's and
			// hands it on through the PMI key-value store.
			env := append([]string{"PMI_PORT=" + net.JoinHostPort(addr, port), "PMI_ID=" + strconv.Itoa(r),
				"MPLITE_ENDPOINT=" + strconv.Itoa(local[r]), "MPLITE_LOCAL_SIZE=" + strconv.Itoa(onHost[host])}, o.env...)
			if !o.auth {
				env = append(env, "MPLITE_AUTH=0")
			}
			cmd.Args = append(append(launcher, host), remoteCommand(cwd, env, o.prog))
			return cmd.Start()
		}
	}, stdout, stderr)
	cancel(errors.New("job over"))
	// The ranks' exit statuses are the verdict: a program that never
	// speaks PMI (hostname, a script) is a fine rank, and one that dies
	// without finalize has already failed above.
	<-served
	if len(failed) > 0 {
		return fmt.Errorf("mprun: %d rank(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

// remoteCommand is the shell command a launcher runs on the host: into the
// same directory, with the job's environment, the program in place of the
// shell.
func remoteCommand(dir string, env, prog []string) string {
	var b strings.Builder
	b.WriteString("cd " + shellQuote(dir) + " && exec env")
	for _, e := range env {
		b.WriteString(" " + shellQuote(e))
	}
	for _, a := range prog {
		b.WriteString(" " + shellQuote(a))
	}
	return b.String()
}

// addressToward returns the local address the kernel would use to reach
// host, which is the address a rank there reaches us at.
func addressToward(ctx context.Context, host string) (string, error) {
	ip := net.ParseIP(host)
	if ip == nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, err := net.DefaultResolver.LookupIP(lctx, "ip4", host)
		cancel()
		if err != nil || len(ips) == 0 {
			return "", fmt.Errorf("mprun: host %s: %v", host, err)
		}
		ip = ips[0]
	}
	local, err := localaddr.Toward(ip)
	if err != nil {
		return "", fmt.Errorf("mprun: host %s: %w", host, err)
	}
	return local.String(), nil
}
