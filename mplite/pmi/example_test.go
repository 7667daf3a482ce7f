package pmi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/ethervia/ethervia/mplite/pmi"
)

// A launcher serves PMI to the ranks it starts; each rank finds the server
// through PMI_FD. Here the "rank" is a shell that only initialises PMI-1 and
// finalizes, to show what a launcher does.
func ExampleServer_Pair() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := pmi.NewServer(pmi.ServerConfig{Size: 1, JobID: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	child, done, err := s.Pair(ctx, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	cmd := exec.CommandContext(ctx, "sh", "-c",
		`printf 'cmd=init pmi_version=1 pmi_subversion=1\n' >&3; read -r a <&3; `+
			`printf 'cmd=finalize\n' >&3; read -r b <&3; echo "$a"; echo "$b"`)
	cmd.ExtraFiles = []*os.File{child} // fd 3
	cmd.Env = append(os.Environ(), "PMI_FD=3", "PMI_RANK=0", "PMI_SIZE=1")
	out, err := cmd.Output()
	child.Close()
	fmt.Print(string(out))
	fmt.Println("session:", <-done, err)
	// Output:
	// cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1
	// cmd=finalize_ack rc=0
	// session: <nil> <nil>
}
