/// The console's stylesheet and script, served by pushgw itself (`/console/static/…`): no
/// framework, nothing fetched from elsewhere, so the console works with no network. The
/// pages hold no inline script or style (the Content-Security-Policy forbids both).
enum ConsoleAssets {
    static let css = """
        :root { --ink: #1d2330; --muted: #667085; --line: #e4e7ec; --bg: #f6f7f9; --card: #fff; --accent: #2f5bea;
          --good: #12805c; --good-bg: #e3f4ec; --bad: #b42318; --bad-bg: #fdecea; --warn: #b54708; --warn-bg: #fef4e6; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
          color: var(--ink); background: var(--bg); }
        a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
        header.top { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 28px; padding: 8px 24px; min-height: 52px; background: #111827;
          color: #e5e7eb; }
        header.top .brand { color: #fff; font-weight: 650; font-size: 16px; letter-spacing: .2px; }
        header.top .brand .mark { color: #7aa2ff; } header.top .brand .sub { color: #9ca3af; font-weight: 400; }
        header.top nav { display: flex; gap: 4px; flex: 1; }
        header.top nav a { color: #cbd5e1; padding: 6px 12px; border-radius: 6px; }
        header.top nav a.current, header.top nav a:hover { background: #1f2937; color: #fff; text-decoration: none; }
        form.search { display: flex; gap: 6px; margin: 0; }
        form.search input { width: 230px; min-width: 0; padding: 5px 8px; background: #1f2937; border-color: #374151; color: #f9fafb; }
        form.search input::placeholder { color: #9ca3af; }
        form.search button { padding: 5px 10px; background: #1f2937; border-color: #374151; color: #e5e7eb; }
        form.search button:hover { background: #374151; }
        .who { display: flex; align-items: center; gap: 10px; color: #cbd5e1; }
        .who form { margin: 0; }
        .role { font-size: 11px; text-transform: uppercase; letter-spacing: .5px; padding: 2px 7px; border-radius: 10px; background: #374151; }
        .role-readonly { background: #78350f; color: #fde68a; }
        button.link { background: none; border: 0; color: #93c5fd; cursor: pointer; padding: 0; font: inherit; }
        main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 48px; }
        h1 { font-size: 22px; margin: 8px 0 16px; font-weight: 650; } h2 { font-size: 16px; margin: 22px 0 10px; }
        h1, h2, h3 { overflow-wrap: anywhere; } h3 { font-size: 14px; margin: 18px 0 8px; }
        .mono, pre, .id, td.call, td.ids { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
        .summary { display: flex; gap: 12px; margin-bottom: 18px; flex-wrap: wrap; }
        .tile { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 10px 16px; min-width: 130px; }
        .tile .label { color: var(--muted); font-size: 12px; } .tile .value { font-size: 20px; font-weight: 650; }
        .tile.good .value { color: var(--good); } .tile.bad .value { color: var(--bad); }
        section.app { background: var(--card); border: 1px solid var(--line); border-radius: 12px; padding: 14px 18px 10px; margin-bottom: 18px;
          box-shadow: 0 1px 2px rgba(16,24,40,.04); }
        section.app > header { display: flex; align-items: center; gap: 12px; margin-bottom: 8px; }
        section.app h2 { margin: 0; font-size: 17px; }
        .meta { color: var(--muted); margin-left: auto; font-size: 12.5px; }
        .pill { font-size: 12px; padding: 2px 9px; border-radius: 12px; font-weight: 600; }
        .pill.good { background: var(--good-bg); color: var(--good); } .pill.bad { background: var(--bad-bg); color: var(--bad); }
        .columns { display: flex; gap: 28px; flex-wrap: wrap; align-items: flex-start; }
        dl.stats { display: flex; gap: 10px; margin: 4px 0 14px; flex-wrap: wrap; }
        dl.stats > div { background: #f9fafb; border: 1px solid var(--line); border-radius: 8px; padding: 6px 12px; }
        dl.stats dt { color: var(--muted); font-size: 11.5px; } dl.stats dd { margin: 0; font-weight: 600; }
        .detail { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 18px; align-items: start; }
        .card { background: var(--card); border: 1px solid var(--line); border-radius: 12px; padding: 14px 18px; }
        h2.first { margin-top: 0; }
        table { border-collapse: collapse; }
        table.kv th { text-align: left; font-weight: 500; color: var(--muted); padding: 3px 14px 3px 0; white-space: nowrap; }
        table.kv td { padding: 3px 0; overflow-wrap: anywhere; }
        section.card { margin-bottom: 18px; } section.card > header { display: flex; align-items: center; gap: 12px; flex-wrap: wrap; }
        section.card > header h2 { margin: 0; }
        ul.dead-letters { margin: 0; padding-left: 18px; overflow-wrap: anywhere; }
        table.outcomes th, table.outcomes td { padding: 3px 10px 3px 0; text-align: right; }
        table.outcomes th:first-child { text-align: left; font-weight: 500; }
        table.outcomes thead th { color: var(--muted); font-weight: 500; font-size: 12px; border-bottom: 1px solid var(--line); }
        tr.cause th { padding-left: 18px !important; color: var(--muted); font-size: 12.5px; }
        .swatch { display: inline-block; width: 9px; height: 9px; border-radius: 2px; margin-right: 6px; }
        table.outcomes { flex: 0 0 auto; }
        figure.chart { margin: 0; flex: 1 1 420px; min-width: 360px; }
        figure.chart figcaption { color: var(--muted); font-size: 11.5px; }
        svg.chart { width: 100%; height: auto; display: block; }
        svg .grid { stroke: var(--line); stroke-width: 1; } svg .axis { fill: var(--muted); font-size: 10px; }
        svg .axis.latency { fill: #7c3aed; } svg .empty { fill: var(--muted); font-size: 12px; }
        svg polyline.p99 { fill: none; stroke: #7c3aed; stroke-width: 1.6; } svg circle.p99 { fill: #7c3aed; }
        .o-delivered_voip { fill: #16a34a; background: #16a34a; } .o-delivered_alert { fill: #f59e0b; background: #f59e0b; }
        .o-dead_lettered { fill: #dc2626; background: #dc2626; } .o-expired { fill: #7c2d12; background: #7c2d12; }
        .o-undeliverable { fill: #6b7280; background: #6b7280; } .o-cancelled { fill: #a3a3a3; background: #a3a3a3; }
        form.filters { display: flex; gap: 12px; align-items: flex-end; flex-wrap: wrap; background: var(--card); border: 1px solid var(--line);
          border-radius: 10px; padding: 12px 14px; margin-bottom: 14px; }
        label { display: flex; flex-direction: column; gap: 3px; color: var(--muted); font-size: 12px; }
        input, select { font: inherit; color: var(--ink); border: 1px solid #cfd4dc; border-radius: 6px; padding: 6px 8px; background: #fff; }
        input[type=checkbox] { padding: 0; }
        form.pause { display: flex; gap: 6px; flex-wrap: wrap; margin: 8px 0; } form.pause input { flex: 0 1 18em; min-width: 0; }
        button, a.button { font: inherit; border: 1px solid #cfd4dc; background: #fff; color: var(--ink); border-radius: 6px; padding: 6px 12px;
          cursor: pointer; display: inline-block; }
        button:hover, a.button:hover { background: #f2f4f7; text-decoration: none; }
        button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
        button.danger, a.button.danger { color: var(--bad); border-color: #f3b5ae; }
        button.danger.confirm, form.confirm button.danger { background: var(--bad); color: #fff; }
        .actions { display: flex; gap: 8px; align-items: flex-end; margin: 0 0 12px; flex-wrap: wrap; }
        .actions .sep { width: 14px; }
        a.clear { align-self: center; }
        table.list { width: 100%; background: var(--card); border: 1px solid var(--line); border-radius: 10px; overflow: hidden; }
        table.list th { text-align: left; font-weight: 600; font-size: 12px; color: var(--muted); background: #f9fafb; padding: 8px 10px;
          border-bottom: 1px solid var(--line); }
        table.list td { padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: anywhere; }
        table.list tr:last-child td { border-bottom: 0; }
        td.reason { color: var(--bad); }
        .pager { display: flex; gap: 16px; align-items: center; margin-top: 12px; }
        .hint { color: var(--muted); font-size: 12.5px; }
        .notice { background: #eef2ff; border: 1px solid #c7d2fe; padding: 10px 12px; border-radius: 8px; }
        .warning { background: var(--warn-bg); border: 1px solid #f7c58b; color: var(--warn); padding: 10px 12px; border-radius: 8px; }
        .error { background: var(--bad-bg); border: 1px solid #f3b5ae; color: var(--bad); padding: 10px 12px; border-radius: 8px; }
        .empty { color: var(--muted); padding: 18px; background: var(--card); border: 1px dashed var(--line); border-radius: 10px; }
        ul.problems { color: var(--bad); }
        .crumbs { color: var(--muted); margin: 0; }
        pre.event { background: #0f172a; color: #e2e8f0; padding: 14px 16px; border-radius: 10px; overflow: auto; white-space: pre-wrap;
          overflow-wrap: anywhere; }
        ol.timeline { list-style: none; padding: 0 0 0 18px; margin: 0; border-left: 2px solid var(--line); }
        ol.timeline li { position: relative; padding: 4px 0 12px 14px; }
        ol.timeline li::before { content: ""; position: absolute; left: -25px; top: 9px; width: 10px; height: 10px; border-radius: 50%;
          background: var(--bad); border: 2px solid #fff; box-shadow: 0 0 0 1px var(--line); }
        ol.timeline li.ok::before { background: var(--good); }
        ol.timeline .when { color: var(--muted); font-size: 12px; font-family: ui-monospace, Menlo, Consolas, monospace; }
        ol.timeline .what { display: flex; gap: 10px; align-items: baseline; }
        ol.timeline .channel { font-weight: 650; text-transform: uppercase; font-size: 12px; letter-spacing: .4px; }
        ol.timeline .status { font-weight: 600; } ol.timeline .why { color: var(--bad); }
        ol.timeline .more { color: var(--muted); font-size: 12px; }
        section.signin { max-width: 420px; margin: 60px auto; background: var(--card); border: 1px solid var(--line); border-radius: 12px;
          padding: 22px 26px; }
        section.signin form { display: flex; flex-direction: column; gap: 14px; }
        ul.log { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; background: var(--card); border: 1px solid var(--line);
          border-radius: 10px; padding: 10px 10px 10px 30px; overflow-wrap: anywhere; }
        /* Phone width (360 px up): the header wraps (brand and who, then the sections, then
           the search box), cards take the whole width, and each row of a list becomes a
           card of labelled values (console.js labels the cells from the list's head). */
        @media (max-width: 760px) {
          header.top { gap: 8px 12px; padding: 8px 12px; }
          header.top nav { order: 3; flex: 1 1 100%; flex-wrap: wrap; }
          header.top nav a { padding: 5px 9px; }
          .who { margin-left: auto; flex-wrap: wrap; }
          form.search { order: 4; flex: 1 1 100%; } form.search input { flex: 1 1 auto; width: auto; }
          main { padding: 12px 12px 32px; }
          h1 { font-size: 19px; }
          .detail { grid-template-columns: minmax(0, 1fr); }
          .card, section.app { padding: 12px; }
          section.app > header { flex-wrap: wrap; } .meta { margin-left: 0; }
          .tile { min-width: 0; flex: 1 1 40%; }
          figure.chart { min-width: 0; flex: 1 1 100%; }
          table.outcomes { width: 100%; }
          table.list, table.list tbody, table.list tr, table.list td { display: block; width: 100%; }
          table.list thead { display: none; }
          table.list tr { padding: 6px 0; border-bottom: 1px solid var(--line); }
          table.list tr:last-child { border-bottom: 0; }
          table.list td { border: 0; padding: 2px 12px; }
          table.list td[data-label]::before { content: attr(data-label) ": "; color: var(--muted); font-size: 11.5px; }
          form.filters label { flex: 1 1 40%; } form.filters input, form.filters select { width: 100%; }
        }
        """

    static let javascript = """
        // pushgw console: refreshes live parts in place, the list's "select all" box, and the
        // labels of list cells (shown at phone width, where each row is a card).
        // Served by pushgw (script-src 'self'); no inline script, no eval, no framework.
        "use strict";
        (function () {
          function refresh(live) {
            var ms = parseInt(live.getAttribute("data-refresh-ms"), 10);
            if (!(ms > 0)) { return; }
            window.setTimeout(function () {
              // Not while the operator types in a field of it (a pause's reason): next time.
              var typing = document.activeElement;
              if (typing && typing.tagName === "INPUT" && live.contains(typing)) { refresh(live); return; }
              fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
                .then(function (r) { if (!r.ok || r.redirected) { throw new Error(String(r.status)); } return r.text(); })
                .then(function (html) {
                  var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
                  if (fresh) { label(fresh); live.replaceWith(fresh); refresh(fresh); }
                })
                .catch(function () { window.setTimeout(function () { refresh(live); }, ms); });
            }, ms);
          }
          function label(root) {
            var tables = root.querySelectorAll("table.list");
            for (var t = 0; t < tables.length; t++) {
              var heads = tables[t].querySelectorAll("thead th");
              var rows = tables[t].querySelectorAll("tbody tr");
              for (var r = 0; r < rows.length; r++) {
                for (var c = 0; c < rows[r].children.length && c < heads.length; c++) {
                  var name = heads[c].textContent.trim();
                  if (name) { rows[r].children[c].setAttribute("data-label", name); }
                }
              }
            }
          }
          function ready() {
            label(document);
            var live = document.getElementById("live");
            if (live) { refresh(live); }
            var all = document.getElementById("select-all");
            if (all) {
              all.addEventListener("change", function () {
                var boxes = document.querySelectorAll("#dead-table input[name=ids]");
                for (var i = 0; i < boxes.length; i++) { boxes[i].checked = all.checked; }
              });
            }
          }
          if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", ready); } else { ready(); }
        })();
        """
}
