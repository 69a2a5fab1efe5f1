package api

import (
	"net/url"
	"strconv"
	"time"
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

func querySession(q url.Values) (SessionID, error) {
	v := q.Get("session")
	if v == "" {
		return 0, invalid("the session query parameter is required")
	}
	id, err := ParseSessionID(v)
	if err != nil {
		return 0, invalid("%v", err)
	}
	return id, nil
}

func pathSession(v string) (SessionID, error) {
	id, err := ParseSessionID(v)
	if err != nil {
		return 0, invalid("%v", err)
	}
	return id, nil
}
