package api

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// Query parameters. Their syntax is the API's (Go durations, decimal
// numbers); what the values may be is lockstate's to say.

func queryDuration(q url.Values, key string) (time.Duration, error) {
	v := q.Get(key)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, invalid("%s=%q is not a non-negative Go duration such as \"30s\"", key, v)
	}
	return d, nil
}

func queryInt(q url.Values, key string) (int, error) {
	v := q.Get(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, invalid("%s=%q is not an integer", key, v)
	}
	return n, nil
}

func queryUint(q url.Values, key string) (uint64, error) {
	v := q.Get(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, invalid("%s=%q is not a non-negative integer", key, v)
	}
	return n, nil
}

func querySession(q url.Values) (wire.SessionID, error) {
	v := q.Get("session")
	if v == "" {
		return "", invalid("the session query parameter is required")
	}
	return wire.SessionID(v), nil
}

// Pages of list endpoints: at most MaxPageSize items, DefaultPageSize when
// the client does not say.
const (
	DefaultPageSize = 1000
	MaxPageSize     = 10000
)

// queryPage reads limit and after.
func queryPage(q url.Values) (lockservice.Page, error) {
	limit, err := queryInt(q, "limit")
	switch {
	case err != nil:
		return lockservice.Page{}, err
	case limit < 0 || limit > MaxPageSize:
		return lockservice.Page{}, invalid("limit=%d is outside [1, %d]", limit, MaxPageSize)
	case limit == 0:
		limit = DefaultPageSize
	}
	return lockservice.Page{After: q.Get("after"), Limit: limit}, nil
}

// setNextAfter sets the cursor of the next page, when there is one.
func setNextAfter(w http.ResponseWriter, next string) {
	if next != "" {
		w.Header().Set("X-Next-After", next)
	}
}
