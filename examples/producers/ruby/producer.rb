#!/usr/bin/env ruby
# A pushgw producer in Ruby with Debian's ruby-redis (the `redis` gem, 4.x).
#
# Sends an incoming call, then its cancel (the caller hung up) and an invalid event, then a call
# that rings two devices and is answered on one (docs/protocol.md, *Devices*); reads each
# result by id (GET PREFIX:{APP}:result:ID), then through its own consumer group on the results
# stream, and reads the feedback stream. Prints one line per result and exits 0 when every
# event got its result within TIMEOUT_S seconds, else 1. The contract: docs/protocol.md.
#
# With INGEST_URL and INGEST_KEY (an API key of the app) it also sends a call and its cancel
# through the gateway's HTTP API and reads the call's result there, then a
# call ringing two devices answered on one (POST …/answer).
#
#   REDIS_URL=redis://127.0.0.1:6379/0 ruby producer.rb
require "json"
require "net/http"
require "redis"
require "securerandom"

url = ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0")
app = ENV.fetch("PUSHGW_APP", "acme")
prefix = ENV.fetch("PUSHGW_PREFIX", "pushgw")
voip_token = ENV.fetch("VOIP_TOKEN", "a0a0a0a0a0a0a0a0")
alert_token = ENV.fetch("ALERT_TOKEN", "b0b0b0b0b0b0b0b0")
timeout_s = Float(ENV.fetch("TIMEOUT_S", "10"))
phone = { id: "bob-phone", voip_token: ENV.fetch("PHONE_VOIP_TOKEN", "c0c0c0c0c0c0c0c0"),
          alert_token: ENV.fetch("PHONE_ALERT_TOKEN", "c1c1c1c1c1c1c1c1") }
ipad = { id: "bob-ipad", voip_token: ENV.fetch("IPAD_VOIP_TOKEN", "c2c2c2c2c2c2c2c2"),
         alert_token: ENV.fetch("IPAD_ALERT_TOKEN", "c3c3c3c3c3c3c3c3") }
# With PIXEL_FCM_TOKEN set (an app with an fcm_credential), Bob's Android phone rings too.
devices = [phone, ipad]
devices << { id: "bob-pixel", fcm_token: ENV["PIXEL_FCM_TOKEN"] } unless ENV.fetch("PIXEL_FCM_TOKEN", "").empty?

r = Redis.new(url: url)
key = "#{prefix}:{#{app}}:"  # the app's keys: pushgw:{acme}:calls, …
group = "producer-ruby"      # this producer's group on the results stream
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout_s
now = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }

# Our own consumer group on the results stream, created before we write, at its end ($).
begin
  r.xgroup(:create, key + "results", group, "$", mkstream: true)
rescue Redis::CommandError => e
  raise unless e.message.include?("BUSYGROUP")
end

entries = {} # calls entry id (results carry it as `entry`) -> event
send_event = ->(event, name) { entries[r.xadd(key + "calls", { event: JSON.generate(event) })] = name }
# The event's result, from its per-event key (no scan of the results stream).
result_by_id = lambda do |event_id, kind = "result:"|
  while now.call < deadline
    found = r.get(key + kind + event_id)
    return JSON.parse(found) if found&.start_with?("{") # absent, or in_flight:…: not finished yet
    sleep 0.05
  end
  nil
end

call_id = "call-rb-#{SecureRandom.hex(6)}" # fresh: the idempotency key
send_event.call({ v: 1, id: call_id, type: "incoming_call", voip_token: voip_token, alert_token: alert_token,
                  deadline: (Time.now.to_f * 1000).to_i + 30_000,
                  voip: { caller: "+15551234567", callerName: "Alice" } }, call_id)
results = { call_id => result_by_id.call(call_id) }
# The caller hangs up: the cancel's own result is under cancel-result:ID.
send_event.call({ v: 1, id: call_id, type: "call_cancelled" }, "cancel:#{call_id}")
bad_id = "#{call_id}-bad"
send_event.call({ v: 1, id: bad_id, type: "incoming_call", voip_token: "not-hex" }, bad_id)
results["cancel:#{call_id}"] = result_by_id.call(call_id, "cancel-result:")
results[bad_id] = result_by_id.call(bad_id)
# A call that rings both of Bob's devices; he answers on the phone a second later, and the
# iPad stops ringing (one background push). The answer's own result is under cancel-result:ID.
multi_id = "#{call_id}-multi"
send_event.call({ v: 1, id: multi_id, type: "incoming_call", devices: devices,
                  deadline: (Time.now.to_f * 1000).to_i + 30_000,
                  voip: { caller: "+15551234567", callerName: "Alice" } }, multi_id)
sleep 1
send_event.call({ v: 1, id: multi_id, type: "call_answered", device: "bob-phone" }, "answer:#{multi_id}")
results[multi_id] = result_by_id.call(multi_id)
results["answer:#{multi_id}"] = result_by_id.call(multi_id, "cancel-result:")

ok = true
results.each do |name, res|
  if res.nil?
    puts "result #{name} none: no result within #{timeout_s} s"
    ok = false
    next
  end
  detail = res["cause"] || res["reason"] || res["first_outcome"] || res["ended"] || "-"
  puts "result #{res['id']} #{res['type']} #{res['outcome']} #{detail}"
end

# The same results through our consumer group: each entry names the calls entry it answers.
seen = 0
while seen < entries.size && now.call < deadline
  streams = r.xreadgroup(group, "worker-1", key + "results", ">", count: 100, block: 500)
  (streams[key + "results"] || []).each do |id, fields|
    seen += 1 if entries.key?(JSON.parse(fields["result"])["entry"])
    r.xack(key + "results", group, id)
  end
end
puts "group #{group} #{seen} results"
ok &&= seen == entries.size

# The same through the HTTP API (docs/protocol.md, "The HTTP API"), when the gateway has one:
# a call that waits for its result, its cancel, and the result read by id (net/http: stdlib).
ingest_url, ingest_key = ENV["INGEST_URL"], ENV["INGEST_KEY"]
if ingest_url && ingest_key
  api = lambda do |method, path, event = nil|
    uri = URI("#{ingest_url}/v1/apps/#{app}/calls#{path}")
    request = (method == :post ? Net::HTTP::Post : Net::HTTP::Get).new(uri)
    request["Authorization"] = "Bearer #{ingest_key}"
    request["Content-Type"] = "application/json"
    request.body = JSON.generate(event) if event
    JSON.parse(Net::HTTP.start(uri.host, uri.port, use_ssl: uri.scheme == "https", read_timeout: 15) { |h| h.request(request) }.body)
  end
  api_id = "call-rb-api-#{SecureRandom.hex(6)}"
  done = api.call(:post, "?wait=5s", { v: 1, id: api_id, type: "incoming_call", voip_token: ENV.fetch("API_VOIP_TOKEN", "a1a1a1a1a1a1a1a1"),
                                       voip: { caller: "+15551234567", callerName: "Alice" } })
  puts "api call #{api_id} #{done.dig('result', 'outcome')}"
  cancelled = api.call(:post, "/#{api_id}/cancel?wait=5s")["result"] || {}
  puts "api cancel #{api_id} #{cancelled['outcome']} #{cancelled['cancelled_after'] || '-'}"
  read = api.call(:get, "/#{api_id}")
  puts "api result #{api_id} #{read.dig('result', 'outcome')}"
  ok &&= read["status"] == "done"
  # A call ringing two devices through the API; Bob answers on the phone and the iPad stops.
  multi_id = "#{api_id}-multi"
  devices = [{ id: "bob-phone", voip_token: ENV.fetch("API_PHONE_TOKEN", "b0b0b0b0b0b0b0b0") },
             { id: "bob-ipad", voip_token: ENV.fetch("API_IPAD_TOKEN", "b2b2b2b2b2b2b2b2") }]
  api.call(:post, "", { v: 1, id: multi_id, type: "incoming_call", devices: devices,
                        deadline: (Time.now.to_f * 1000).to_i + 30_000, voip: { caller: "+15551234567", callerName: "Alice" } })
  sleep 1
  answered = api.call(:post, "/#{multi_id}/answer?wait=5s", { device: "bob-phone" })["result"] || {}
  puts "api answer #{multi_id} #{answered['outcome']}"
  multi = api.call(:get, "/#{multi_id}?wait=5s")["result"] || {}
  puts "api result #{multi_id} #{multi['outcome']} #{multi['ended'] || '-'}"
  ok &&= answered["outcome"] == "answered"
end

r.xrevrange(key + "feedback", "+", "-", count: 100).each do |_, f|
  next unless [voip_token, alert_token].include?(f["token"])
  puts "feedback #{f['channel']} #{f['token']} #{f['reason']} #{f['timestamp']}"
end
exit(ok ? 0 : 1)
