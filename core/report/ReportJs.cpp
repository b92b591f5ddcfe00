#include "report/ReportAssets.h"

namespace pipescope::report {

// Gantt timelines drawn on a canvas from the JSON blocks next to them.
// Rows are sorted by start and do not overlap (communication aside), so the
// visible range is found by binary search; text reaches the page only
// through textContent and fillText, never as markup.
const char* const kReportJs = R"JS(
(function () {
  'use strict';
  var css = getComputedStyle(document.documentElement);
  function v(name) { return css.getPropertyValue(name).trim() || '#888'; }
  var KIND = ['F', 'B', 'I', 'W'];
  var KIND_COLOR = KIND.map(function (k) { return v('--k-' + k); });
  var COMM_COLOR = [v('--m-p2p'), v('--m-collective')];
  var BUSY = v('--busy');

  function fmt(ns) {
    var a = Math.abs(ns);
    if (a < 1e3) return Math.round(ns) + ' ns';
    if (a < 1e6) return (ns / 1e3).toFixed(3) + ' us';
    if (a < 1e9) return (ns / 1e6).toFixed(3) + ' ms';
    return (ns / 1e9).toFixed(3) + ' s';
  }
  function niceStep(span, target) {
    var raw = span / Math.max(1, target), p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }
  // First index whose start is >= t - back (rows sorted by start).
  function lowerBound(row, t) {
    var lo = 0, hi = row.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (row[mid][0] < t) lo = mid + 1; else hi = mid; }
    return lo;
  }
  function maxDur(row) { var m = 0; for (var i = 0; i < row.length; i++) if (row[i][1] > m) m = row[i][1]; return m; }

  function Gantt(root, data) {
    this.root = root; this.data = data;
    this.canvas = root.querySelector('canvas'); this.tip = root.querySelector('.tip');
    this.range = root.querySelector('.range');
    this.causeColor = data.causes.map(function (c) { return v('--c-' + c); });
    this.labelW = data.folded ? 136 : 112; this.axisH = 22; this.mainH = 16; this.commH = 5; this.gapH = 6; this.stageH = 15;
    var y = this.axisH + 4, lastStage = null, self = this;
    var staged = data.lanes.some(function (l) { return l.stage >= 0; }); // no stage headings without a pipeline
    this.lanes = data.lanes.map(function (l) {
      var lane = { l: l, stageY: -1 };
      if (staged && l.stage !== lastStage) { lane.stageY = y; y += self.stageH; lastStage = l.stage; }
      lane.y = y; y += self.mainH + 2 + self.commH + self.gapH;
      lane.back = { steps: maxDur(l.steps), bubbles: maxDur(l.bubbles), comm: maxDur(l.comm), busy: maxDur(l.busy) };
      return lane;
    });
    this.height = y + 4;
    this.v0 = 0; this.v1 = Math.max(1, data.duration_ns);
    this.bind();
    this.resize();
  }
  Gantt.prototype.x = function (t) { return this.labelW + (t - this.v0) / (this.v1 - this.v0) * (this.width - this.labelW - 8); };
  Gantt.prototype.t = function (x) { return this.v0 + (x - this.labelW) / (this.width - this.labelW - 8) * (this.v1 - this.v0); };
  Gantt.prototype.resize = function () {
    var dpr = window.devicePixelRatio || 1;
    this.width = Math.max(320, this.root.clientWidth - 2);
    this.canvas.width = Math.round(this.width * dpr); this.canvas.height = Math.round(this.height * dpr);
    this.canvas.style.height = this.height + 'px';
    this.ctx = this.canvas.getContext('2d'); this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.draw();
  };
  Gantt.prototype.drawRow = function (row, back, y, h, color, label) {
    var ctx = this.ctx, i = lowerBound(row, this.v0 - back), lastX = -1;
    for (; i < row.length; i++) {
      var it = row[i];
      if (it[0] > this.v1) break;
      if (it[0] + it[1] < this.v0) continue;
      var x0 = Math.max(this.labelW, this.x(it[0])), x1 = Math.min(this.width - 8, this.x(it[0] + it[1]));
      if (x1 - x0 < 1) { if (Math.floor(x0) === lastX) continue; x1 = x0 + 1; }
      lastX = Math.floor(x0);
      ctx.fillStyle = color(it);
      ctx.fillRect(x0, y, x1 - x0, h);
      if (label && x1 - x0 > 18) {
        var text = label(it);
        if (text) {
          ctx.fillStyle = '#fff';
          ctx.save(); ctx.beginPath(); ctx.rect(x0, y, x1 - x0, h); ctx.clip();
          ctx.fillText(text, x0 + 3, y + h - 4); ctx.restore();
        }
      }
    }
  };
  Gantt.prototype.draw = function () {
    var ctx = this.ctx, self = this, W = this.width;
    ctx.clearRect(0, 0, W, this.height);
    ctx.font = '11px system-ui, sans-serif';
    // axis
    var span = this.v1 - this.v0, step = niceStep(span, (W - this.labelW) / 110);
    ctx.strokeStyle = '#e6e9ed'; ctx.fillStyle = '#6a737d'; ctx.lineWidth = 1;
    for (var t = Math.ceil(this.v0 / step) * step; t <= this.v1; t += step) {
      var x = Math.round(this.x(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, this.axisH - 4); ctx.lineTo(x, this.height); ctx.stroke();
      ctx.fillText(fmt(t).replace(/\.(\d*?)0+ /, function (m, d) { return d ? '.' + d + ' ' : ' '; }), x + 3, 13);
    }
    var kindLabel = function (it) { return (KIND[it[2]] || '?') + (it[5] > 1 ? '×' + it[5] : (it[3] >= 0 ? it[3] : '')); };
    this.lanes.forEach(function (lane) {
      var l = lane.l;
      if (lane.stageY >= 0) {
        ctx.fillStyle = '#1d2329'; ctx.font = '600 11px system-ui, sans-serif';
        ctx.fillText(l.stage >= 0 ? 'stage ' + l.stage + (l.of > 1 ? ' · ' + l.of + ' replicas, the slowest and the fastest drawn' : '')
                                  : 'outside the pipeline', 6, lane.stageY + 11);
        ctx.strokeStyle = '#c5ccd3'; ctx.beginPath(); ctx.moveTo(0, lane.stageY + 0.5); ctx.lineTo(W, lane.stageY + 0.5); ctx.stroke();
        ctx.font = '11px system-ui, sans-serif';
      }
      ctx.fillStyle = '#1d2329';
      ctx.fillText('rank ' + l.rank + (l.role ? ' · ' + l.role : l.replica > 0 ? ' · r' + l.replica : ''), 14, lane.y + 12);
      ctx.fillStyle = '#f6f8fa'; ctx.fillRect(self.labelW, lane.y, W - self.labelW - 8, self.mainH);
      // Bubbles first: a folded run of them may span short compute, which then stays visible on top.
      ctx.globalAlpha = 0.75;
      self.drawRow(l.bubbles, lane.back.bubbles, lane.y + 4, self.mainH - 8, function (it) { return self.causeColor[it[2]] || '#999'; });
      ctx.globalAlpha = 1;
      self.drawRow(l.busy, lane.back.busy, lane.y + 3, self.mainH - 6, function () { return BUSY; });
      self.drawRow(l.steps, lane.back.steps, lane.y, self.mainH, function (it) { return KIND_COLOR[it[2]] || '#666'; }, kindLabel);
      self.drawRow(l.comm, lane.back.comm, lane.y + self.mainH + 2, self.commH, function (it) { return COMM_COLOR[it[2]] || '#999'; });
    });
    if (this.range) this.range.textContent = fmt(this.v0) + ' – ' + fmt(this.v1) + '  (' + fmt(span) + ' shown)';
  };
  Gantt.prototype.find = function (row, back, t, slack) {
    var i = lowerBound(row, t - back - slack), best = null;
    for (; i < row.length && row[i][0] <= t + slack; i++)
      if (row[i][0] - slack <= t && t <= row[i][0] + row[i][1] + slack) { best = row[i]; if (row[i][0] <= t) break; }
    return best;
  };
  Gantt.prototype.hit = function (mx, my) {
    if (mx < this.labelW) return null;
    var t = this.t(mx), slack = (this.v1 - this.v0) / (this.width - this.labelW) * 2, d = this.data;
    for (var k = 0; k < this.lanes.length; k++) {
      var lane = this.lanes[k], l = lane.l, where = 'rank ' + l.rank + (l.stage >= 0 ? ' · stage ' + l.stage : '') +
          (l.of > 1 ? ' (' + l.role + ' of ' + l.of + ' replicas)' : '');
      if (my >= lane.y - 1 && my <= lane.y + this.mainH + 1) {
        var s = this.find(l.steps, lane.back.steps, t, slack);
        if (s) {
          var head = s[5] > 1 ? s[5] + ' steps folded (each narrower than ' + fmt(d.fold_ns) + ')'
                              : (KIND[s[2]] || '?') + '  microbatch ' + s[3] + (s[4] > 0 ? '  chunk ' + s[4] : '');
          return [head, 'start  +' + fmt(s[0]), 'duration  ' + fmt(s[1]), where];
        }
        var c = this.find(l.busy, lane.back.busy, t, slack);
        if (c) return ['compute' + (c[2] > 1 ? '  (' + c[2] + ' blocks folded)' : ''), 'start  +' + fmt(c[0]), 'duration  ' + fmt(c[1]), where];
        var b = this.find(l.bubbles, lane.back.bubbles, t, slack);
        if (b) return ['bubble: ' + (d.causes[b[2]] || '?') + (b[3] > 1 ? '  (' + b[3] + ' folded)' : ''),
                       'start  +' + fmt(b[0]), 'duration  ' + fmt(b[1]), where];
        return null;
      }
      var cy = lane.y + this.mainH + 2;
      if (my >= cy - 2 && my <= cy + this.commH + 2) {
        var m = this.find(l.comm, lane.back.comm, t, slack);
        if (m) {
          var name = m[3] >= 0 && d.names[m[3]] !== undefined ? d.names[m[3]] : '';
          return [d.comm_kinds[m[2]] + (m[4] > 1 ? '  (' + m[4] + ' kernels folded)' : ''), name, 'start  +' + fmt(m[0]),
                  'duration  ' + fmt(m[1]), where].filter(function (x) { return x !== ''; });
        }
        return null;
      }
    }
    return null;
  };
  Gantt.prototype.zoom = function (factor, anchorT) {
    var full = Math.max(1, this.data.duration_ns), minSpan = Math.max(100, Math.min(this.data.fold_ns / 4, full));
    var span = Math.min(full, Math.max(minSpan, (this.v1 - this.v0) * factor));
    var f = (anchorT - this.v0) / (this.v1 - this.v0);
    this.v0 = anchorT - f * span; this.v1 = this.v0 + span; this.clamp(); this.draw();
  };
  Gantt.prototype.clamp = function () {
    var full = Math.max(1, this.data.duration_ns), span = this.v1 - this.v0;
    if (this.v0 < 0) { this.v0 = 0; this.v1 = span; }
    if (this.v1 > full) { this.v1 = full; this.v0 = Math.max(0, full - span); }
  };
  Gantt.prototype.bind = function () {
    var self = this, c = this.canvas, drag = null;
    function pos(e) { var r = c.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; }
    c.addEventListener('wheel', function (e) {
      var p = pos(e);
      if (p[0] < self.labelW) return;
      e.preventDefault();
      self.zoom(Math.pow(1.0015, e.deltaY * (e.deltaMode === 1 ? 16 : 1)), self.t(p[0]));
    }, { passive: false });
    c.addEventListener('pointerdown', function (e) {
      drag = { x: pos(e)[0], v0: self.v0, v1: self.v1 }; c.setPointerCapture(e.pointerId); c.classList.add('dragging');
    });
    c.addEventListener('pointerup', function (e) { drag = null; c.releasePointerCapture(e.pointerId); c.classList.remove('dragging'); });
    c.addEventListener('pointermove', function (e) {
      var p = pos(e);
      if (drag) {
        var dt = (p[0] - drag.x) / (self.width - self.labelW - 8) * (drag.v1 - drag.v0);
        self.v0 = drag.v0 - dt; self.v1 = drag.v1 - dt; self.clamp(); self.draw(); self.tip.hidden = true; return;
      }
      var lines = self.hit(p[0], p[1]);
      if (!lines) { self.tip.hidden = true; return; }
      self.tip.textContent = lines.join('\n');
      self.tip.hidden = false;
      var tx = p[0] + 14, ty = p[1] + 16;
      if (tx + self.tip.offsetWidth > self.width) tx = Math.max(0, p[0] - self.tip.offsetWidth - 10);
      self.tip.style.left = tx + 'px'; self.tip.style.top = (ty + c.offsetTop) + 'px';
    });
    c.addEventListener('pointerleave', function () { self.tip.hidden = true; });
    c.addEventListener('dblclick', function () { self.reset(); });
    var btn = this.root.querySelector('button.reset');
    if (btn) btn.addEventListener('click', function () { self.reset(); });
    window.addEventListener('resize', function () { self.resize(); });
  };
  Gantt.prototype.reset = function () { this.v0 = 0; this.v1 = Math.max(1, this.data.duration_ns); this.draw(); };

  var roots = document.querySelectorAll('[data-gantt]');
  for (var i = 0; i < roots.length; i++) {
    var el = document.getElementById(roots[i].getAttribute('data-gantt'));
    var data = el ? JSON.parse(el.textContent) : null;
    if (data && data.lanes) {
      roots[i].gantt = new Gantt(roots[i], data);
      roots[i].setAttribute('data-drawn', String(data.lanes.length)); // lets a headless browser check that drawing ran
    }
  }
})();
)JS";

} // namespace pipescope::report
