//go:build unix && !linux

package main

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the command in its own process group, so that signals
// reach the whole job.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
