package main

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the command in its own process group, so that signals
// reach the whole job, and has the kernel kill it if lockctl dies (a job
// whose lockctl is gone no longer has its session kept alive).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
