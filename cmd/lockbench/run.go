package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// api is how lockbench reaches the nodes' HTTP API: plain HTTP, or HTTPS
// with a TLS config from the client package.
type api struct {
	tls   *tls.Config // nil: plain HTTP
	token string      // ACL secret sent as a bearer token; "" for none
}

// scheme is "https" with a TLS config, else "http".
func (a api) scheme() string {
	if a.tls != nil {
		return "https"
	}
	return "http"
}

// url is the base URL of the node at addr (host:port).
func (a api) url(addr string) string { return a.scheme() + "://" + addr }

// client returns an HTTP client that keeps up to conns connections per
// node. Its transport speaks HTTP/1.1, over TLS or not, so that each
// lockbench client has a connection of its own either way.
func (a api) client(conns int, timeout time.Duration) *http.Client {
	var rt http.RoundTripper = &http.Transport{
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		TLSClientConfig: a.tls,
	}
	if a.token != "" {
		rt = bearer{rt: rt, token: a.token}
	}
	return &http.Client{Timeout: timeout, Transport: rt}
}

// bearer adds the ACL token to every request.
type bearer struct {
	rt    http.RoundTripper
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// result is one run's pairs and per-pair latencies.
type result struct {
	pairs, errors int
	elapsed       time.Duration
	lat           []time.Duration
}

func (r *result) rate() float64 { return float64(r.pairs) / r.elapsed.Seconds() }

// quantile returns the q-quantile of pair latencies (q=1: the maximum).
func (r *result) quantile(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	i := int(q * float64(len(r.lat)-1))
	return r.lat[i].Round(10 * time.Microsecond)
}

// bench drives n clients against targets for d after a warmup: each on a
// name of its own, or with shared all on one name (each pair is then a
// handoff, and its latency mostly the wait in the queue).
func bench(a api, targets []string, n int, prefix string, shared bool, warmup, d time.Duration) (*result, error) {
	hc := a.client(n+4, 30*time.Second)
	defer hc.CloseIdleConnections()
	type clientOut struct {
		lat    []time.Duration
		errors int
		err    error
	}
	outs := make([]clientOut, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	measureFrom, stopAt := time.Time{}, time.Time{}
	ready.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			defer done.Done()
			base := a.url(targets[i%len(targets)])
			out := &outs[i]
			sid, err := createSession(hc, base)
			ready.Done()
			if err != nil {
				out.err = err
				return
			}
			defer deleteSession(hc, base, sid)
			<-start
			name := fmt.Sprintf("%s/c%d", prefix, i)
			if shared {
				name = prefix + "/shared"
			}
			for {
				t0 := time.Now()
				if !t0.Before(stopAt) {
					return
				}
				err := pair(hc, base, sid, name)
				if t0.After(measureFrom) {
					if err != nil {
						out.errors++
					} else {
						out.lat = append(out.lat, time.Since(t0))
					}
				}
			}
		}(i)
	}
	ready.Wait()
	for _, o := range outs {
		if o.err != nil {
			close(start)
			done.Wait()
			return nil, o.err
		}
	}
	now := time.Now()
	measureFrom, stopAt = now.Add(warmup), now.Add(warmup+d)
	close(start)
	done.Wait()
	r := &result{elapsed: d}
	for _, o := range outs {
		r.lat = append(r.lat, o.lat...)
		r.errors += o.errors
	}
	r.pairs = len(r.lat)
	slices.Sort(r.lat)
	return r, nil
}

// pair acquires name (waiting up to 60s) and releases it.
func pair(hc *http.Client, base, sid, name string) error {
	if err := acquireOne(hc, base, sid, name, 60*time.Second); err != nil {
		return err
	}
	return release(hc, base, sid, name)
}

// acquireOne takes name for session sid, waiting up to wait; anything
// but a grant is an error.
func acquireOne(hc *http.Client, base, sid, name string, wait time.Duration) error {
	var out struct {
		Status string `json:"status"`
	}
	body := map[string]any{"session": sid, "locks": []map[string]any{{"name": name, "mode": "write"}}, "wait": wait.String()}
	if err := post(hc, base+"/v1/acquire", body, &out); err != nil {
		return err
	}
	if out.Status != "granted" {
		return fmt.Errorf("acquire %s: %s", name, out.Status)
	}
	return nil
}

// release gives up session sid's hold on name.
func release(hc *http.Client, base, sid, name string) error {
	return post(hc, base+"/v1/release", map[string]any{"session": sid, "name": name}, nil)
}

func createSession(hc *http.Client, base string) (string, error) {
	return createSessionTTL(hc, base, 60*time.Second)
}

func createSessionTTL(hc *http.Client, base string, ttl time.Duration) (string, error) {
	var s struct {
		ID string `json:"id"`
	}
	if err := post(hc, base+"/v1/sessions", map[string]any{"ttl": ttl.String(), "name": "lockbench"}, &s); err != nil {
		return "", err
	}
	return s.ID, nil
}

func deleteSession(hc *http.Client, base, id string) {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodDelete, base+"/v1/sessions/"+id, nil)
	if resp, err := hc.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func post(hc *http.Client, url string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := hc.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// waitLeader returns the HTTP address of the leader, asking each node's
// /v1/status until one names a leader. On timeout its error includes the
// last failure, say a certificate that did not verify.
func waitLeader(a api, nodes []string, timeout time.Duration) (string, error) {
	hc := a.client(1, 2*time.Second)
	defer hc.CloseIdleConnections()
	var lastErr error
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			leader, err := leaderOf(hc, a.url(n))
			if err == nil {
				return leader, nil
			}
			lastErr = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("no leader within %v: %w", timeout, lastErr)
}

// leaderOf returns the HTTP address of the leader that the node at base
// knows of, or an error if it knows none.
func leaderOf(hc *http.Client, base string) (string, error) {
	resp, err := hc.Get(base + "/v1/status?stale")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s/v1/status: %s", base, resp.Status)
	}
	var st struct {
		Leader struct {
			HTTPAddr string `json:"http_addr"`
		} `json:"leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "", fmt.Errorf("%s/v1/status: %w", base, err)
	}
	if st.Leader.HTTPAddr == "" {
		return "", fmt.Errorf("%s knows no leader", base)
	}
	return st.Leader.HTTPAddr, nil
}
