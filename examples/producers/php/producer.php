<?php
// A pushgw producer in PHP with Debian's php-redis (the phpredis extension, 5.x).
//
// Sends an incoming call, then its cancel (the caller hung up) and an invalid event, then a call
// that rings two devices and is answered on one (docs/protocol.md, *Devices*); reads each
// result by id (GET PREFIX:{APP}:result:ID), then through its own consumer group on the results
// stream, and reads the feedback stream. Prints one line per result and exits 0 when every
// event got its result within TIMEOUT_S seconds, else 1. The contract: docs/protocol.md.
//
// With INGEST_URL and INGEST_KEY (an API key of the app) it also sends a call and its cancel
// through the gateway's HTTP API and reads the call's result there, then a
// call ringing two devices answered on one (POST …/answer).
//
//   REDIS_URL=redis://127.0.0.1:6379/0 php producer.php

$url = getenv('REDIS_URL') ?: 'redis://127.0.0.1:6379/0';
$app = getenv('PUSHGW_APP') ?: 'acme';
$prefix = getenv('PUSHGW_PREFIX') ?: 'pushgw';
$voipToken = getenv('VOIP_TOKEN') ?: 'a0a0a0a0a0a0a0a0';
$alertToken = getenv('ALERT_TOKEN') ?: 'b0b0b0b0b0b0b0b0';
$timeoutS = (float)(getenv('TIMEOUT_S') ?: '10');
$phone = ['id' => 'bob-phone', 'voip_token' => getenv('PHONE_VOIP_TOKEN') ?: 'c0c0c0c0c0c0c0c0',
          'alert_token' => getenv('PHONE_ALERT_TOKEN') ?: 'c1c1c1c1c1c1c1c1'];
$ipad = ['id' => 'bob-ipad', 'voip_token' => getenv('IPAD_VOIP_TOKEN') ?: 'c2c2c2c2c2c2c2c2',
         'alert_token' => getenv('IPAD_ALERT_TOKEN') ?: 'c3c3c3c3c3c3c3c3'];
// With PIXEL_FCM_TOKEN set (an app with an fcm_credential), Bob's Android phone rings too.
$devices = [$phone, $ipad];
if (getenv('PIXEL_FCM_TOKEN')) $devices[] = ['id' => 'bob-pixel', 'fcm_token' => getenv('PIXEL_FCM_TOKEN')];
$deadline = microtime(true) + $timeoutS;

// phpredis takes host and port, not a URL.
$u = parse_url($url);
$r = new Redis();
$r->connect($u['host'] ?? '127.0.0.1', $u['port'] ?? 6379);
if (isset($u['pass'])) {
    $r->auth(isset($u['user']) && $u['user'] !== '' ? [$u['user'], $u['pass']] : $u['pass']);
}
$r->select((int)ltrim($u['path'] ?? '/0', '/'));

$key = "$prefix:{{$app}}:";  // the app's keys: pushgw:{acme}:calls, …
$group = 'producer-php';      // this producer's group on the results stream

// Our own consumer group on the results stream, created before we write, at its end ($).
// phpredis returns false (no exception) when the group exists already (BUSYGROUP).
$r->xGroup('CREATE', $key . 'results', $group, '$', true);

$entries = [];  // calls entry id (results carry it as `entry`) -> event
$send = function (array $event, string $name) use ($r, $key, &$entries) {
    $entries[$r->xAdd($key . 'calls', '*', ['event' => json_encode($event)])] = $name;
};
// The event's result, from its per-event key (no scan of the results stream).
$resultById = function (string $eventId, string $kind = 'result:') use ($r, $key, $deadline) {
    while (microtime(true) < $deadline) {
        $found = $r->get($key . $kind . $eventId);
        if ($found !== false && str_starts_with($found, '{')) {  // absent, or in_flight:…: not finished yet
            return json_decode($found, true);
        }
        usleep(50000);
    }
    return null;
};

$callId = 'call-php-' . bin2hex(random_bytes(6));  // fresh: the idempotency key
$send(['v' => 1, 'id' => $callId, 'type' => 'incoming_call', 'voip_token' => $voipToken, 'alert_token' => $alertToken,
       'deadline' => (int)(microtime(true) * 1000) + 30000,
       'voip' => ['caller' => '+15551234567', 'callerName' => 'Alice']], $callId);
$results = [$callId => $resultById($callId)];
// The caller hangs up: the cancel's own result is under cancel-result:ID.
$send(['v' => 1, 'id' => $callId, 'type' => 'call_cancelled'], "cancel:$callId");
$badId = "$callId-bad";
$send(['v' => 1, 'id' => $badId, 'type' => 'incoming_call', 'voip_token' => 'not-hex'], $badId);
$results["cancel:$callId"] = $resultById($callId, 'cancel-result:');
$results[$badId] = $resultById($badId);
// A call that rings both of Bob's devices; he answers on the phone a second later, and the
// iPad stops ringing (one background push). The answer's own result is under cancel-result:ID.
$multiId = "$callId-multi";
$send(['v' => 1, 'id' => $multiId, 'type' => 'incoming_call', 'devices' => $devices,
       'deadline' => (int)(microtime(true) * 1000) + 30000,
       'voip' => ['caller' => '+15551234567', 'callerName' => 'Alice']], $multiId);
sleep(1);
$send(['v' => 1, 'id' => $multiId, 'type' => 'call_answered', 'device' => 'bob-phone'], "answer:$multiId");
$results[$multiId] = $resultById($multiId);
$results["answer:$multiId"] = $resultById($multiId, 'cancel-result:');

$ok = true;
foreach ($results as $name => $res) {
    if ($res === null) {
        echo "result $name none: no result within $timeoutS s\n";
        $ok = false;
        continue;
    }
    $detail = $res['cause'] ?? $res['reason'] ?? $res['first_outcome'] ?? $res['ended'] ?? '-';
    echo "result {$res['id']} {$res['type']} {$res['outcome']} $detail\n";
}

// The same results through our consumer group: each entry names the calls entry it answers.
$seen = 0;
while ($seen < count($entries) && microtime(true) < $deadline) {
    $streams = $r->xReadGroup($group, 'worker-1', [$key . 'results' => '>'], 100, 500) ?: [];
    foreach ($streams[$key . 'results'] ?? [] as $id => $fields) {
        $entry = json_decode($fields['result'], true)['entry'] ?? null;
        if ($entry !== null && isset($entries[$entry])) {
            $seen++;
        }
        $r->xAck($key . 'results', $group, [$id]);
    }
}
echo "group $group $seen results\n";
$ok = $ok && $seen === count($entries);

// The same through the HTTP API (docs/protocol.md, "The HTTP API"), when the gateway has one:
// a call that waits for its result, its cancel, and the result read by id (PHP's http streams).
$ingestUrl = getenv('INGEST_URL');
$ingestKey = getenv('INGEST_KEY');
if ($ingestUrl && $ingestKey) {
    $api = function (string $method, string $path, ?array $event = null) use ($ingestUrl, $ingestKey, $app): array {
        $context = stream_context_create(['http' => [
            'method' => $method, 'ignore_errors' => true, 'timeout' => 15,   // ignore_errors: read 4xx/5xx bodies too
            'header' => "Authorization: Bearer $ingestKey\r\nContent-Type: application/json\r\n",
            'content' => $event === null ? '' : json_encode($event)]]);
        return json_decode(file_get_contents("$ingestUrl/v1/apps/$app/calls$path", false, $context), true) ?? [];
    };
    $apiId = 'call-php-api-' . bin2hex(random_bytes(6));
    $done = $api('POST', '?wait=5s', ['v' => 1, 'id' => $apiId, 'type' => 'incoming_call',
                                      'voip_token' => getenv('API_VOIP_TOKEN') ?: 'a1a1a1a1a1a1a1a1',
                                      'voip' => ['caller' => '+15551234567', 'callerName' => 'Alice']]);
    echo "api call $apiId " . ($done['result']['outcome'] ?? '') . "\n";
    $cancelled = $api('POST', "/$apiId/cancel?wait=5s")['result'] ?? [];
    echo "api cancel $apiId " . ($cancelled['outcome'] ?? '') . ' ' . ($cancelled['cancelled_after'] ?? '-') . "\n";
    $read = $api('GET', "/$apiId");
    echo "api result $apiId " . ($read['result']['outcome'] ?? '') . "\n";
    $ok = $ok && ($read['status'] ?? '') === 'done';
    // A call ringing two devices through the API; Bob answers on the phone and the iPad stops.
    $multiId = "$apiId-multi";
    $devices = [['id' => 'bob-phone', 'voip_token' => getenv('API_PHONE_TOKEN') ?: 'b0b0b0b0b0b0b0b0'],
                ['id' => 'bob-ipad', 'voip_token' => getenv('API_IPAD_TOKEN') ?: 'b2b2b2b2b2b2b2b2']];
    $api('POST', '', ['v' => 1, 'id' => $multiId, 'type' => 'incoming_call', 'devices' => $devices,
                      'deadline' => (int) (microtime(true) * 1000) + 30000,
                      'voip' => ['caller' => '+15551234567', 'callerName' => 'Alice']]);
    sleep(1);
    $answered = $api('POST', "/$multiId/answer?wait=5s", ['device' => 'bob-phone'])['result'] ?? [];
    echo "api answer $multiId " . ($answered['outcome'] ?? '') . "\n";
    $multi = $api('GET', "/$multiId?wait=5s")['result'] ?? [];
    echo "api result $multiId " . ($multi['outcome'] ?? '') . ' ' . ($multi['ended'] ?? '-') . "\n";
    $ok = $ok && ($answered['outcome'] ?? '') === 'answered';
}

foreach ($r->xRevRange($key . 'feedback', '+', '-', 100) as $f) {
    if ($f['token'] === $voipToken || $f['token'] === $alertToken) {
        echo "feedback {$f['channel']} {$f['token']} {$f['reason']} {$f['timestamp']}\n";
    }
}
exit($ok ? 0 : 1);
