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

Drive a docker-compose lockd cluster by hand (build the suite's image first: make jepsen-image).

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
  clock NODE OFFSET     offset NODE's wall clock (e.g. 90s, -5m, 0); nodes need LOCKD_TEST_CLOCK_HOOK=1 on up
  leave NODE            NODE leaves the cluster for good (POST /v1/agent/leave) and exits
  remove NODE           kill NODE and remove it from the raft configuration through another node
  replace NODE          NODE again as a fresh node (empty data dir, same id), which joins

flags:
`

func nemesisCmd(args []string) int {
	fs, o := nemesisFlags()
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if o.nodes != 3 && o.nodes != 5 {
		fmt.Fprintln(os.Stderr, "nemesis: --nodes must be 3 or 5")
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	c := &compose.Cluster{Dir: o.dir, Project: o.project, Nodes: o.nodes, Subnet: o.subnet, PortPrefix: o.prefix}
	if o.unsafe != "" {
		c.Env = append(c.Env, "LOCKD_UNSAFE="+o.unsafe)
	}
	if v := os.Getenv("LOCKD_TEST_CLOCK_HOOK"); v != "" {
		c.Env = append(c.Env, "LOCKD_TEST_CLOCK_HOOK="+v)
	}
	c.Token = o.token
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	c.LearnIDs(ctx) // nodes a run replaced under new ids keep them
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	command, ok := nemesisCommands[cmd]
	if !ok {
		fmt.Fprintf(os.Stderr, "nemesis: unknown command %q\n\n", cmd)
		fs.Usage()
		return 2
	}
	if command.args != anyArgs && len(rest) != command.args {
		fmt.Fprintf(os.Stderr, "nemesis %s: want %d argument(s)\n", cmd, command.args)
		return 2
	}
	n := &nemesisSession{ctx: ctx, c: c, rand: rand.New(rand.NewSource(o.seed)), args: rest}
	if err := command.run(n); err != nil {
		fmt.Fprintf(os.Stderr, "nemesis %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// nemesisOptions are the flags of lockjepsen nemesis.
type nemesisOptions struct {
	nodes                   int
	project, subnet, prefix string
	dir, unsafe, token      string
	seed                    int64
	timeout                 time.Duration
}

func nemesisFlags() (*flag.FlagSet, *nemesisOptions) {
	o := &nemesisOptions{}
	fs := flag.NewFlagSet("nemesis", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), nemesisUsage)
		fs.PrintDefaults()
	}
	fs.IntVar(&o.nodes, "nodes", 3, "cluster size: 3 or 5")
	fs.StringVar(&o.project, "project", compose.DefaultProject, "compose project name")
	fs.StringVar(&o.subnet, "subnet", compose.DefaultSubnet, "first three octets of the cluster network (LOCKD_SUBNET)")
	fs.StringVar(&o.prefix, "port-prefix", compose.DefaultPortPrefix, "host port prefix: node k on 127.0.0.1:<prefix>k (LOCKD_PORT_PREFIX)")
	fs.StringVar(&o.dir, "dir", ".", "directory holding docker-compose.yml")
	fs.Int64Var(&o.seed, "seed", time.Now().UnixNano(), "random seed for split and bridge")
	fs.StringVar(&o.unsafe, "unsafe", os.Getenv("LOCKD_UNSAFE"), "LOCKD_UNSAFE passed to the nodes on up")
	fs.StringVar(&o.token, "token", os.Getenv("LOCKD_TOKEN"), "management token for clock, leave and remove on a cluster with ACLs")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound on the whole command")
	return fs, o
}

// nemesisSession is one nemesis command against a cluster.
type nemesisSession struct {
	ctx  context.Context
	c    *compose.Cluster
	rand *rand.Rand // for split and bridge
	args []string   // the command's arguments
}

// nemesisCommand is a subcommand of lockjepsen nemesis.
type nemesisCommand struct {
	args int // how many arguments it takes, or anyArgs
	run  func(*nemesisSession) error
}

// anyArgs: the command ignores arguments it does not use.
const anyArgs = -1

var nemesisCommands = map[string]nemesisCommand{
	"up":             {anyArgs, (*nemesisSession).up},
	"down":           {anyArgs, (*nemesisSession).down},
	"status":         {anyArgs, (*nemesisSession).status},
	"isolate":        {1, (*nemesisSession).isolate},
	"isolate-leader": {anyArgs, (*nemesisSession).isolateLeader},
	"split":          {anyArgs, (*nemesisSession).split},
	"bridge":         {anyArgs, (*nemesisSession).bridge},
	"heal":           {anyArgs, (*nemesisSession).heal},
	"kill":           {1, nodeFault(nemesis.Kill)},
	"restart":        {1, nodeFault(nemesis.Restart)},
	"pause":          {1, nodeFault(nemesis.Pause)},
	"resume":         {1, nodeFault(nemesis.Resume)},
	"recover":        {anyArgs, (*nemesisSession).recoverCluster},
	"clock":          {2, (*nemesisSession).clock},
	"leave":          {1, nodeFault(func(ctx context.Context, c *compose.Cluster, n string) error { return c.Leave(ctx, n) })},
	"remove":         {1, (*nemesisSession).remove},
	"replace":        {1, nodeFault(func(ctx context.Context, c *compose.Cluster, n string) error { return c.Replace(ctx, n) })},
}

func (n *nemesisSession) clock() error {
	d, err := time.ParseDuration(n.args[1])
	if err != nil {
		return err
	}
	return n.c.SetClock(n.ctx, n.args[0], d)
}

// remove kills a node and removes it through the first other node that
// accepts, asking again while gossip still sees it alive.
func (n *nemesisSession) remove() error {
	node := n.args[0]
	if err := nemesis.Kill(n.ctx, n.c, node); err != nil {
		return err
	}
	return nemesis.RemoveThroughOthers(n.ctx, n.c, node)
}

func (n *nemesisSession) up() error {
	err := n.c.Up(n.ctx)
	if err == nil {
		printStatus(n.ctx, os.Stdout, n.c)
	}
	return err
}

func (n *nemesisSession) down() error { return n.c.Down(n.ctx) }

func (n *nemesisSession) status() error {
	printStatus(n.ctx, os.Stdout, n.c)
	return nil
}

func (n *nemesisSession) partition(groups [][]string) error {
	fmt.Printf("partition %s\n", nemesis.GroupsString(groups))
	return nemesis.Partition(n.ctx, n.c, groups)
}

func (n *nemesisSession) isolate() error {
	return n.partition(nemesis.IsolateGroups(n.c.Names(), n.args[0]))
}

func (n *nemesisSession) isolateLeader() error {
	l, _ := n.c.Leader(n.ctx)
	if l == "" {
		return fmt.Errorf("no leader")
	}
	return n.partition(nemesis.IsolateGroups(n.c.Names(), l))
}

// split makes a random majority/minority split, or the groups given.
func (n *nemesisSession) split() error {
	if len(n.args) == 0 {
		return n.partition(nemesis.MajorityMinority(n.c.Names(), n.rand))
	}
	return n.partition(nemesis.ParseGroups(n.args))
}

func (n *nemesisSession) bridge() error { return n.partition(nemesis.Bridge(n.c.Names(), n.rand)) }

func (n *nemesisSession) heal() error { return nemesis.Heal(n.ctx, n.c) }

func (n *nemesisSession) recoverCluster() error { return nemesis.Healthy(n.ctx, n.c) }

// nodeFault is a command that applies fault to the node its argument
// names.
func nodeFault(fault func(context.Context, *compose.Cluster, string) error) func(*nemesisSession) error {
	return func(n *nemesisSession) error { return fault(n.ctx, n.c, n.args[0]) }
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
