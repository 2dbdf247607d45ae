// A pushgw producer in Go with Debian's golang-github-gomodule-redigo-dev (redigo), built in
// GOPATH mode with Debian's golang: no module download.
//
// Sends an incoming call, then its cancel (the caller hung up) and an invalid event, then a
// call that rings two devices and is answered on one (docs/protocol.md, *Devices*); reads
// each result by id (GET PREFIX:{APP}:result:ID), then through its own consumer group on the
// results stream, and reads the feedback stream. Prints one line per result and exits 0 when
// every event got its result within TIMEOUT_S seconds, else 1. The contract: docs/protocol.md.
//
// With INGEST_URL and INGEST_KEY (an API key of the app) it also sends a call and its cancel
// through the gateway's HTTP API and reads the call's result there, then a
// call ringing two devices answered on one (POST …/answer).
//
//	GO111MODULE=off GOPATH=/usr/share/gocode REDIS_URL=redis://127.0.0.1:6379/0 go run producer.go
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func main() {
	url := env("REDIS_URL", "redis://127.0.0.1:6379/0")
	app := env("PUSHGW_APP", "acme")
	prefix := env("PUSHGW_PREFIX", "pushgw")
	voipToken := env("VOIP_TOKEN", "a0a0a0a0a0a0a0a0")
	alertToken := env("ALERT_TOKEN", "b0b0b0b0b0b0b0b0")
	timeoutS, _ := strconv.ParseFloat(env("TIMEOUT_S", "10"), 64)
	phone := map[string]any{"id": "bob-phone", "voip_token": env("PHONE_VOIP_TOKEN", "c0c0c0c0c0c0c0c0"),
		"alert_token": env("PHONE_ALERT_TOKEN", "c1c1c1c1c1c1c1c1")}
	ipad := map[string]any{"id": "bob-ipad", "voip_token": env("IPAD_VOIP_TOKEN", "c2c2c2c2c2c2c2c2"),
		"alert_token": env("IPAD_ALERT_TOKEN", "c3c3c3c3c3c3c3c3")}
	// With PIXEL_FCM_TOKEN set (an app with an fcm_credential), Bob's Android phone rings too.
	devices := []any{phone, ipad}
	if pixel := os.Getenv("PIXEL_FCM_TOKEN"); pixel != "" {
		devices = append(devices, map[string]any{"id": "bob-pixel", "fcm_token": pixel})
	}
	deadline := time.Now().Add(time.Duration(timeoutS * float64(time.Second)))

	r, err := redis.DialURL(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer r.Close()
	key := prefix + ":{" + app + "}:" // the app's keys: pushgw:{acme}:calls, …
	group := "producer-go"           // this producer's group on the results stream

	// Our own consumer group on the results stream, created before we write, at its end ($).
	if _, err := r.Do("XGROUP", "CREATE", key+"results", group, "$", "MKSTREAM"); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	entries := map[string]string{} // calls entry id (results carry it as `entry`) -> event
	send := func(event map[string]any, name string) {
		text, _ := json.Marshal(event)
		id, err := redis.String(r.Do("XADD", key+"calls", "*", "event", string(text)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		entries[id] = name
	}
	// The event's result, from its per-event key (no scan of the results stream).
	resultByID := func(kind, eventID string) map[string]any {
		for time.Now().Before(deadline) {
			found, err := redis.Bytes(r.Do("GET", key+kind+eventID))
			if err == nil && len(found) > 0 && found[0] == '{' { // absent, or in_flight:…: not finished yet
				var res map[string]any
				if json.Unmarshal(found, &res) == nil {
					return res
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	}

	random := make([]byte, 6)
	rand.Read(random)
	callID := "call-go-" + hex.EncodeToString(random) // fresh: the idempotency key
	send(map[string]any{"v": 1, "id": callID, "type": "incoming_call", "voip_token": voipToken, "alert_token": alertToken,
		"deadline": time.Now().Add(30 * time.Second).UnixMilli(),
		"voip":     map[string]any{"caller": "+15551234567", "callerName": "Alice"}}, callID)
	multiID := callID + "-multi"
	names := []string{callID, "cancel:" + callID, callID + "-bad", multiID, "answer:" + multiID}
	results := map[string]map[string]any{callID: resultByID("result:", callID)}
	// The caller hangs up: the cancel's own result is under cancel-result:ID.
	send(map[string]any{"v": 1, "id": callID, "type": "call_cancelled"}, names[1])
	send(map[string]any{"v": 1, "id": names[2], "type": "incoming_call", "voip_token": "not-hex"}, names[2])
	results[names[1]] = resultByID("cancel-result:", callID)
	results[names[2]] = resultByID("result:", names[2])
	// A call that rings both of Bob's devices; he answers on the phone a second later, and the
	// iPad stops ringing (one background push). The answer's own result is under cancel-result:ID.
	send(map[string]any{"v": 1, "id": multiID, "type": "incoming_call", "devices": devices,
		"deadline": time.Now().Add(30 * time.Second).UnixMilli(),
		"voip":     map[string]any{"caller": "+15551234567", "callerName": "Alice"}}, multiID)
	time.Sleep(time.Second)
	send(map[string]any{"v": 1, "id": multiID, "type": "call_answered", "device": "bob-phone"}, names[4])
	results[multiID] = resultByID("result:", multiID)
	results[names[4]] = resultByID("cancel-result:", multiID)

	ok := true
	for _, name := range names {
		res := results[name]
		if res == nil {
			fmt.Printf("result %s none: no result within %v s\n", name, timeoutS)
			ok = false
			continue
		}
		detail := "-"
		for _, field := range []string{"cause", "reason", "first_outcome", "ended"} {
			if s, found := res[field].(string); found {
				detail = s
				break
			}
		}
		fmt.Printf("result %v %v %v %s\n", res["id"], res["type"], res["outcome"], detail)
	}

	// The same results through our consumer group: each entry names the calls entry it answers.
	seen := 0
	for seen < len(entries) && time.Now().Before(deadline) {
		streams, err := redis.Values(r.Do("XREADGROUP", "GROUP", group, "worker-1", "COUNT", 100, "BLOCK", 500,
			"STREAMS", key+"results", ">"))
		if err == redis.ErrNil {
			continue
		} else if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, s := range streams {
			stream, _ := redis.Values(s, nil)
			items, _ := redis.Values(stream[1], nil)
			for _, item := range items {
				entry, _ := redis.Values(item, nil)
				id, _ := redis.String(entry[0], nil)
				fields, _ := redis.StringMap(entry[1], nil)
				var res map[string]any
				if json.Unmarshal([]byte(fields["result"]), &res) == nil {
					if e, found := res["entry"].(string); found && entries[e] != "" {
						seen++
					}
				}
				r.Do("XACK", key+"results", group, id)
			}
		}
	}
	fmt.Printf("group %s %d results\n", group, seen)
	ok = ok && seen == len(entries)

	// The same through the HTTP API (docs/protocol.md, "The HTTP API"), when the gateway has one:
	// a call that waits for its result, its cancel, and the result read by id (net/http: stdlib).
	if ingestURL, ingestKey := os.Getenv("INGEST_URL"), os.Getenv("INGEST_KEY"); ingestURL != "" && ingestKey != "" {
		api := func(method, path string, event map[string]any) map[string]any {
			var body io.Reader
			if event != nil {
				text, _ := json.Marshal(event)
				body = bytes.NewReader(text)
			}
			req, _ := http.NewRequest(method, ingestURL+"/v1/apps/"+app+"/calls"+path, body)
			req.Header.Set("Authorization", "Bearer "+ingestKey)
			req.Header.Set("Content-Type", "application/json")
			out := map[string]any{}
			if answer, err := (&http.Client{Timeout: 15 * time.Second}).Do(req); err == nil {
				defer answer.Body.Close()
				json.NewDecoder(answer.Body).Decode(&out) // 4xx/5xx too: {"error": code, "message": …}
			}
			return out
		}
		result := func(answer map[string]any) map[string]any { r, _ := answer["result"].(map[string]any); return r }
		apiID := "call-go-api-" + hex.EncodeToString(random)
		done := api("POST", "?wait=5s", map[string]any{"v": 1, "id": apiID, "type": "incoming_call",
			"voip_token": env("API_VOIP_TOKEN", "a1a1a1a1a1a1a1a1"),
			"voip":       map[string]any{"caller": "+15551234567", "callerName": "Alice"}})
		fmt.Printf("api call %s %v\n", apiID, result(done)["outcome"])
		cancelled := result(api("POST", "/"+apiID+"/cancel?wait=5s", nil))
		after, found := cancelled["cancelled_after"]
		if !found {
			after = "-"
		}
		fmt.Printf("api cancel %s %v %v\n", apiID, cancelled["outcome"], after)
		read := api("GET", "/"+apiID, nil)
		fmt.Printf("api result %s %v\n", apiID, result(read)["outcome"])
		ok = ok && read["status"] == "done"
		// A call ringing two devices through the API; Bob answers on the phone and the iPad stops.
		multiID := apiID + "-multi"
		devices := []map[string]any{{"id": "bob-phone", "voip_token": env("API_PHONE_TOKEN", "b0b0b0b0b0b0b0b0")},
			{"id": "bob-ipad", "voip_token": env("API_IPAD_TOKEN", "b2b2b2b2b2b2b2b2")}}
		api("POST", "", map[string]any{"v": 1, "id": multiID, "type": "incoming_call", "devices": devices,
			"deadline": time.Now().UnixMilli() + 30000, "voip": map[string]any{"caller": "+15551234567", "callerName": "Alice"}})
		time.Sleep(time.Second)
		answered := result(api("POST", "/"+multiID+"/answer?wait=5s", map[string]any{"device": "bob-phone"}))
		fmt.Printf("api answer %s %v\n", multiID, answered["outcome"])
		multi := result(api("GET", "/"+multiID+"?wait=5s", nil))
		ended, found := multi["ended"]
		if !found {
			ended = "-"
		}
		fmt.Printf("api result %s %v %v\n", multiID, multi["outcome"], ended)
		ok = ok && answered["outcome"] == "answered"
	}

	feedback, _ := redis.Values(r.Do("XREVRANGE", key+"feedback", "+", "-", "COUNT", 100))
	for _, item := range feedback {
		entry, _ := redis.Values(item, nil)
		f, _ := redis.StringMap(entry[1], nil)
		if f["token"] == voipToken || f["token"] == alertToken {
			fmt.Printf("feedback %s %s %s %s\n", f["channel"], f["token"], f["reason"], f["timestamp"])
		}
	}
	if !ok {
		os.Exit(1)
	}
}
