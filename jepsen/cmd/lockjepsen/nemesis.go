package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/nemesis"
)

const nemesisUsage = `usage: lockjepsen nemesis [flags] COMMAND [ARGS]

Drive a docker-compose lockd cluster by hand (build the image first: make docker).

commands:
  up                    start n1..nN and wait until they agree on a leader with N voters
  down                  stop and remove the cluster and its volumes
  status                table of nodes: state, leader, term, applied, digest, blackholes
  isolate NODE          cut NODE off from every other node
  isolate-leader        cut the current leader off
  split [G1 G2 ...]     random majority/minority split, or explicit groups (split n1,n2 n3)
  bridge                two sides joined only through one random node
  heal                  remove every blackhole route
  kill NODE             docker kill -s KILL (stays down until restart)
  restart NODE          docker start NODE and wait until it answers
  pause NODE            docker pause
  resume NODE           docker unpause
  recover               resume, restart and heal everything, wait until healthy

flags:
`

func nemesisCmd(args []string) int {
	fs := flag.NewFlagSet("nemesis", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), nemesisUsage)
		fs.PrintDefaults()
	}
	nodes := fs.Int("nodes", 3, "cluster size: 3 or 5")
	project := fs.String("project", compose.DefaultProject, "compose project name")
	subnet := fs.String("subnet", compose.DefaultSubnet, "first three octets of the cluster network (LOCKD_SUBNET)")
	prefix := fs.String("port-prefix", compose.DefaultPortPrefix, "host port prefix: node k on 127.0.0.1:<prefix>k (LOCKD_PORT_PREFIX)")
	dir := fs.String("dir", ".", "directory holding docker-compose.yml")
	seed := fs.Int64("seed", time.Now().UnixNano(), "random seed for split and bridge")
	unsafe := fs.String("unsafe", os.Getenv("LOCKD_UNSAFE"), "LOCKD_UNSAFE passed to the nodes on up")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the whole command")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *nodes != 3 && *nodes != 5 {
		fmt.Fprintln(os.Stderr, "nemesis: --nodes must be 3 or 5")
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	c := &compose.Cluster{Dir: *dir, Project: *project, Nodes: *nodes, Subnet: *subnet, PortPrefix: *prefix}
	if *unsafe != "" {
		c.Env = append(c.Env, "LOCKD_UNSAFE="+*unsafe)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	r := rand.New(rand.NewSource(*seed))
	cmd, rest := fs.Arg(0), fs.Args()[1:]

	need := func(n int) bool {
		if len(rest) != n {
			fmt.Fprintf(os.Stderr, "nemesis %s: want %d argument(s)\n", cmd, n)
			return false
		}
		return true
	}
	partition := func(groups [][]string) error {
		fmt.Printf("partition %s\n", nemesis.GroupsString(groups))
		return nemesis.Partition(ctx, c, groups)
	}
	var err error
	switch cmd {
	case "up":
		err = c.Up(ctx)
		if err == nil {
			printStatus(ctx, os.Stdout, c)
		}
	case "down":
		err = c.Down(ctx)
	case "status":
		printStatus(ctx, os.Stdout, c)
	case "isolate":
		if !need(1) {
			return 2
		}
		err = partition(nemesis.IsolateGroups(c.Names(), rest[0]))
	case "isolate-leader":
		l, _ := c.Leader(ctx)
		if l == "" {
			err = fmt.Errorf("no leader")
			break
		}
		err = partition(nemesis.IsolateGroups(c.Names(), l))
	case "split":
		if len(rest) == 0 {
			err = partition(nemesis.MajorityMinority(c.Names(), r))
		} else {
			err = partition(nemesis.ParseGroups(rest))
		}
	case "bridge":
		err = partition(nemesis.Bridge(c.Names(), r))
	case "heal":
		err = nemesis.Heal(ctx, c)
	case "kill", "restart", "pause", "resume":
		if !need(1) {
			return 2
		}
		f := map[string]func(context.Context, *compose.Cluster, string) error{
			"kill": nemesis.Kill, "restart": nemesis.Restart,
			"pause": nemesis.Pause, "resume": nemesis.Resume,
		}[cmd]
		err = f(ctx, c, rest[0])
	case "recover":
		err = nemesis.Healthy(ctx, c)
	default:
		fmt.Fprintf(os.Stderr, "nemesis: unknown command %q\n\n", cmd)
		fs.Usage()
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nemesis %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func printStatus(ctx context.Context, w io.Writer, c *compose.Cluster) {
	st := c.Statuses(ctx)
	holes, _ := nemesis.Blackholes(ctx, c)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCONTAINER\tSTATE\tLEADER\tTERM\tCOMMIT\tAPPLIED\tDIGEST\tVOTERS\tBLACKHOLES")
	for _, n := range c.Names() {
		cs, err := c.State(ctx, n)
		if err != nil {
			cs = "absent"
		}
		s := st[n]
		bh := strings.Join(holes[n], ",")
		if bh == "" {
			bh = "-"
		}
		if s == nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\t%s\n", n, cs, bh)
			continue
		}
		d := s.Digest
		if len(d) > 12 {
			d = d[:12]
		}
		l := s.Leader.ID
		if l == "" {
			l = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\n", n, cs, s.State, l,
			s.Term, s.CommitIndex, s.AppliedIndex, d, compose.Voters(s), bh)
	}
	tw.Flush()
	l, _ := c.Leader(ctx)
	fmt.Fprintf(w, "leader: %s\n", l)
}
