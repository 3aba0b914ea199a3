/* The HTML report: one self-contained page (inline CSS and JavaScript, nothing fetched) holding the
 * failed request, the "why" statements, a timeline of live device bytes stacked by the top call sites
 * (timeline.h), the site table of the --at moment (default: the peak) with expandable stacks, the
 * devices, the ring's counts, the markers and the notes.
 *
 * Tables and text are HTML written here, readable without JavaScript. The timeline is drawn in the
 * browser, as SVG, from a JSON blob embedded in a <script type="application/json"> element; in that
 * blob '<', '>' and '&' are written as \u003c, \u003e and \u0026, so no string can close the element.
 * The page's script sets data-drawn="N" on #timeline, N the number of series drawn, once it is done. */
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "render/json_writer.h"
#include "render/sitelabel.h"
#include "analyze/stackview.h"
#include "analyze/timeline.h"
#include "analyze/why.h"

#define H_POINTS 2000      /* timeline points at most (per series) */
#define H_NAME_MAX 160     /* bytes of one frame name in a label */
#define H_MARKERS_TIMELINE 1024
#define H_MARKERS_LISTED 50
#define H_FRAMES_MAX 256   /* frames shown per stack */

/* Series colours: the top sites, then "other" (last). Shared by the CSS and the script. */
static const char *const palette[OT_TL_TOP + 1] = {
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#bab0ac",
};

struct hx {
    FILE *f;
    const struct ot_analysis *a;
    const struct ot_snapshot *s;
    const struct ot_report_opts *o;
    struct ot_timeline tl;
    bool has_tl;
    char **series_names;
    struct ot_sb sb;
};

/* Untrusted bytes as HTML text or attribute value: &<>"' escaped; valid UTF-8 passes; control
 * characters and invalid bytes shown as \xNN. max_bytes > 0 cuts with "...". */
static void h_ascii(FILE *f, unsigned c, void *ctx)
{
    (void)ctx;
    switch (c) {
    case '&':
        fputs("&amp;", f);
        break;
    case '<':
        fputs("&lt;", f);
        break;
    case '>':
        fputs("&gt;", f);
        break;
    case '"':
        fputs("&quot;", f);
        break;
    case '\'':
        fputs("&#39;", f);
        break;
    default:
        if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            putc_unlocked((int)c, f);
    }
}

static void h_text(FILE *f, struct ot_str s, size_t max_bytes)
{
    if (ot_fput_markup(f, s, max_bytes, "\\x%02x", h_ascii, NULL))
        fputs("...", f);
}

static void h_cstr(FILE *f, const char *s)
{
    h_text(f, ot_cstr(s), 0);
}

static const char css[] =
    ":root{--fg:#1d2330;--muted:#5b6475;--line:#d9dee7;--bg:#f5f7fa;--card:#fff;--bad:#c0392b;--accent:#2b5fab}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,"
    "'Helvetica Neue',Arial,sans-serif}\n"
    "header{background:#1d2330;color:#fff;padding:18px 28px}\n"
    "header h1{margin:0 0 4px;font-size:22px;font-weight:600}\n"
    "header .sub{color:#c5cbd6;margin:0;font-size:13px}\n"
    "header code{color:#fff;background:rgba(255,255,255,.08);padding:1px 5px;border-radius:3px}\n"
    "main{max-width:1320px;margin:0 auto;padding:18px 28px 40px}\n"
    ".card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:16px 20px;margin:0 0 18px}\n"
    ".card h2{font-size:16px;margin:0 0 10px;font-weight:600}\n"
    ".card h2 small{color:var(--muted);font-weight:400;font-size:13px;margin-left:6px}\n"
    ".fail{border-left:5px solid var(--bad)}\n"
    ".fail .big{font-size:17px}\n"
    ".fail .big b{color:var(--bad)}\n"
    "code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono',monospace;font-size:12.5px}\n"
    "ul.why{margin:6px 0 0;padding-left:20px}\n"
    "ul.why li{margin:3px 0}\n"
    "table{border-collapse:collapse;width:100%}\n"
    "th,td{text-align:left;padding:6px 8px;border-bottom:1px solid var(--line);vertical-align:top}\n"
    "th{font-weight:600;color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.03em}\n"
    "td.num,th.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}\n"
    ".sw{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:6px;"
    "border:1px solid rgba(0,0,0,.15)}\n"
    ".bar{height:6px;background:#e6eaf1;border-radius:3px;margin-top:4px;min-width:60px}\n"
    ".bar i{display:block;height:6px;border-radius:3px;background:var(--accent)}\n"
    "details summary{cursor:pointer}\n"
    "details summary code{font-weight:600}\n"
    "ol.stack{margin:6px 0 2px;padding-left:34px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;"
    "font-size:12px;word-break:break-all}\n"
    "ol.stack li{margin:1px 0}\n"
    "ol.stack .py{color:#1d4f91}\n"
    "ol.stack .py b{font-weight:600}\n"
    "ol.stack .dim{color:#98a0ad}\n"
    "ol.stack .loc{color:var(--muted)}\n"
    "#timeline{position:relative;width:100%;min-height:440px}\n"
    "#timeline svg{display:block;width:100%;height:440px;font:12px system-ui,Arial,sans-serif}\n"
    "#timeline .axis text{fill:#4a5263}\n"
    "#timeline .grid line{stroke:#e9edf3}\n"
    "#timeline .halo{paint-order:stroke;stroke:#fff;stroke-width:4px;stroke-linejoin:round}\n"
    "#tip{position:absolute;pointer-events:none;background:rgba(29,35,48,.95);color:#fff;padding:8px 10px;"
    "border-radius:6px;font-size:12px;line-height:1.5;display:none;max-width:460px;z-index:2;"
    "box-shadow:0 4px 14px rgba(0,0,0,.25)}\n"
    "#tip .sw{width:10px;height:10px}\n"
    "#tip .t{color:#c5cbd6}\n"
    ".legend{display:grid;grid-template-columns:1fr;gap:2px;margin:8px 0 0 74px;font-size:12.5px}\n"
    ".legend:before{content:'At the peak, top of the stack first:';color:var(--muted);font-size:12px}\n"
    ".legend span.item{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}\n"
    ".legend b{display:inline-block;min-width:72px;font-weight:600;font-variant-numeric:tabular-nums}\n"
    ".controls{float:right;font-size:12.5px}\n"
    ".controls button{font:inherit;padding:3px 10px;border:1px solid var(--line);border-radius:4px;background:#fff;"
    "cursor:pointer}\n"
    ".note{color:var(--muted);font-size:12.5px;margin:8px 0 0}\n"
    ".warn{color:#8a5300}\n"
    "footer{color:var(--muted);font-size:12px;text-align:center;margin-top:10px}\n";

/* The timeline: data from the JSON blob, drawn as SVG. Loops are bounded by the data's length. */
static const char script[] =
    "(function(){'use strict';\n"
    "var D=JSON.parse(document.getElementById('oomtrace-data').textContent);\n"
    "var el=document.getElementById('timeline'),tip=document.getElementById('tip');\n"
    "var NS='http://www.w3.org/2000/svg',GiB=1073741824,MiB=1048576,KiB=1024;\n"
    "var T=D.t,S=D.series,N=T.length,NSER=S.length,PAL=D.palette;\n"
    /* control characters in labels shown as \xNN, as in the rest of the page */
    "function clean(s){return String(s).replace(/[\\u0000-\\u001f\\u007f]/g,function(c){return'\\\\x'+('0'+c.charCodeAt(0).toString(16)).slice(-2);});}\n"
    "S.forEach(function(x){x.name=clean(x.name);});(D.markers||[]).forEach(function(m){m.label=clean(m.label);});\n"
    "var fitCap=!!(D.capacity&&D.maxTotal>=0.25*D.capacity);\n"
    "function unitFor(m){if(m>=0.5*GiB)return[GiB,'GiB'];if(m>=0.5*MiB)return[MiB,'MiB'];if(m>=KiB)return[KiB,'KiB'];return[1,'B'];}\n"
    "function fmtB(b){var u=b>=GiB?[GiB,'GiB']:b>=MiB?[MiB,'MiB']:b>=KiB?[KiB,'KiB']:[1,'B'],v=b/u[0];"
    "return(u[0]==1||v>=100?v.toFixed(0):v>=10?v.toFixed(1):v.toFixed(2))+' '+u[1];}\n"
    "function fmtT(us,d){return'+'+(us/1e6).toFixed(d)+' s';}\n"
    "function ticks(lo,hi,n){var sp=hi-lo;if(!(sp>0))return{v:[lo],step:1};"
    "var st=Math.pow(10,Math.floor(Math.log10(sp/n))),e=sp/n/st;if(e>=7.5)st*=10;else if(e>=3.5)st*=5;else if(e>=1.5)st*=2;"
    "var o=[],v0=Math.ceil(lo/st);for(var i=0;i<1000;i++){var v=(v0+i)*st;if(v>hi+st*1e-9)break;o.push(v);}return{v:o,step:st};}\n"
    "function mk(tag,at,par){var e=document.createElementNS(NS,tag);for(var k in at)e.setAttribute(k,at[k]);if(par)par.appendChild(e);return e;}\n"
    "function txt(par,x,y,s,at){var e=mk('text',at||{},par);e.setAttribute('x',x);e.setAttribute('y',y);e.textContent=s;return e;}\n"
    /* cumulative levels, bottom series first */
    "var cum=[],tot=new Float64Array(N);\n"
    "for(var s=0;s<NSER;s++){var c=new Float64Array(N),v=S[s].v;for(var i=0;i<N;i++){tot[i]+=v[i];c[i]=tot[i];}cum.push(c);}\n"
    "var maxTot=0;for(var i=0;i<N;i++)if(tot[i]>maxTot)maxTot=tot[i];\n"
    "function legend(){var L=document.getElementById('legend');if(!L)return;L.textContent='';"
    "for(var s=NSER-1;s>=0;s--){var it=document.createElement('span');it.className='item';"
    "var sw=document.createElement('span');sw.className='sw';sw.style.background=PAL[s];it.appendChild(sw);"
    "if(S[s].peak!=null){var bb=document.createElement('b');bb.textContent=fmtB(S[s].peak)+' ';it.appendChild(bb);}"
    "it.appendChild(document.createTextNode(S[s].name));"
    "it.title=S[s].name;L.appendChild(it);}}\n"
    "function bsearch(t){var lo=0,hi=N-1;if(t<T[0])return -1;while(lo<hi){var m=(lo+hi+1)>>1;if(T[m]<=t)lo=m;else hi=m-1;}return lo;}\n"
    "function draw(){\n"
    " el.querySelectorAll('svg').forEach(function(x){x.remove();});\n"
    " var W=Math.max(640,el.clientWidth||1200),H=440,ml=74,mr=24,mt=34,mb=58,pw=W-ml-mr,ph=H-mt-mb;\n"
    " var t0=T[0],t1=T[N-1];if(D.failure&&D.failure.t>t1)t1=D.failure.t;if(!(t1>t0))t1=t0+1;var pad=(t1-t0)*0.01;t1+=pad;\n"
    " var top=maxTot;if(D.failure)top=Math.max(top,D.failure.level+D.failure.bytes);if(D.peak)top=Math.max(top,D.peak.bytes);\n"
    " if(fitCap&&D.capacity)top=Math.max(top,D.capacity);if(!(top>0))top=1;top*=1.08;\n"
    " var u=unitFor(top);\n"
    " function X(t){return ml+(t-t0)/(t1-t0)*pw;}function Y(b){return mt+ph-b/top*ph;}\n"
    " var svg=mk('svg',{viewBox:'0 0 '+W+' '+H,preserveAspectRatio:'none',role:'img'},null);\n"
    " svg.setAttribute('aria-label','Live device bytes over time');\n"
    " var clipId='clip'+Math.floor(Math.random()*1e9);var cp=mk('clipPath',{id:clipId},mk('defs',{},svg));mk('rect',{x:ml,y:mt,width:pw,height:ph},cp);\n"
    " var hat=mk('pattern',{id:'hatch',width:6,height:6,patternUnits:'userSpaceOnUse',patternTransform:'rotate(45)'},svg.firstChild);mk('rect',{width:6,height:6,fill:'rgba(192,57,43,.12)'},hat);mk('line',{x1:0,y1:0,x2:0,y2:6,stroke:'#c0392b','stroke-width':2},hat);\n"
    " var yt=ticks(0,top/u[0],6),g=mk('g',{class:'grid'},svg),ax=mk('g',{class:'axis'},svg);\n"
    " yt.v.forEach(function(v){var y=Y(v*u[0]);mk('line',{x1:ml,x2:ml+pw,y1:y,y2:y},g);"
    "txt(ax,ml-8,y+4,(yt.step<1?v.toFixed(Math.min(3,Math.ceil(-Math.log10(yt.step)))):v.toFixed(0)),{'text-anchor':'end'});});\n"
    " var xt=ticks(t0/1e6,t1/1e6,Math.max(3,Math.floor(pw/110))),xd=Math.max(0,Math.min(6,Math.ceil(-Math.log10(xt.step))));\n"
    " xt.v.forEach(function(v){var x=X(v*1e6);mk('line',{x1:x,x2:x,y1:mt,y2:mt+ph},g);txt(ax,x,mt+ph+17,'+'+v.toFixed(xd),{'text-anchor':'middle'});});\n"
    " mk('line',{x1:ml,x2:ml+pw,y1:mt+ph,y2:mt+ph,stroke:'#4a5263'},ax);mk('line',{x1:ml,x2:ml,y1:mt,y2:mt+ph,stroke:'#4a5263'},ax);\n"
    " txt(ax,ml+pw/2,H-12,'seconds since the tracer started',{'text-anchor':'middle'});\n"
    " txt(ax,16,mt+ph/2,u[1],{'text-anchor':'middle',transform:'rotate(-90 16 '+(mt+ph/2)+')'});\n"
    /* What is drawn: every point when there are few; else, per pixel column, the point with the highest
     * total among those in the column and the one in effect at its start (a max envelope: a spike stays
     * at least a pixel wide). The tooltip reads the exact points. */
    " var RX=[],RI=[];if(N>pw/2){var j=0,last=-1;for(var c=0;c<Math.ceil(pw)+1;c++){var x1=ml+c+1,best=last;"
    "while(j<N&&X(T[j])<x1){if(best<0||tot[j]>tot[best])best=j;last=j;j++;}if(best>=0){RX.push(Math.max(ml+c,X(T[0])));RI.push(best);}}}"
    "else{for(var i=0;i<N;i++){RX.push(X(T[i]));RI.push(i);}}\n"
    " var M=RX.length,plot=mk('g',{'clip-path':'url(#'+clipId+')'},svg),drawn=0,xe=X(t1);\n"
    " for(var s=0;s<NSER;s++){var hi=cum[s],lo=s?cum[s-1]:null,any=false;for(var i=0;i<N;i++)if(S[s].v[i]>0){any=true;break;}if(!any)continue;\n"
    "  var d=[],k;for(k=0;k<M;k++){var x=RX[k].toFixed(1),y=Y(hi[RI[k]]).toFixed(1);d.push(k?'H'+x+'V'+y:'M'+x+','+y);}d.push('H'+xe.toFixed(1));\n"
    "  d.push('V'+Y(lo?lo[RI[M-1]]:0).toFixed(1)+'H'+RX[M-1].toFixed(1));for(k=M-2;k>=0;k--){d.push('V'+Y(lo?lo[RI[k]]:0).toFixed(1)+'H'+RX[k].toFixed(1));}d.push('Z');\n"
    "  var p=mk('path',{d:d.join(''),fill:PAL[s],stroke:PAL[s],'stroke-width':0.6},plot);p.setAttribute('data-series',s);drawn++;}\n"
    /* the capacity line */
    " if(D.capacity&&D.capacity<=top){var yc=Y(D.capacity);mk('line',{x1:ml,x2:ml+pw,y1:yc,y2:yc,stroke:'#8e1b10','stroke-width':1.6,'stroke-dasharray':'7 4'},svg);"
    "txt(svg,ml+6,yc-5,'device total '+fmtB(D.capacity),{class:'halo',fill:'#8e1b10','font-weight':600});}\n"
    /* markers: a line each, labels where they fit */
    " var lastEnd=-1e9,lastLine=-1e9,mg=mk('g',{},svg);(D.markers||[]).forEach(function(m){var x=X(m.t);if(x<ml-0.5||x>ml+pw+0.5)return;"
    "if(x-lastLine<4)return;lastLine=x;mk('line',{x1:x,x2:x,y1:mt,y2:mt+ph,stroke:'#6b7385','stroke-width':0.8,'stroke-dasharray':'2 3'},mg);"
    "var lab=m.label.length>28?m.label.slice(0,27)+'\\u2026':m.label;if(x-3>lastEnd&&x+3+lab.length*6.2<=W){txt(mg,x+3,mt-6,lab,{fill:'#4a5263','font-size':11});lastEnd=x+3+lab.length*6.2;}});\n"
    /* the ring's start, when it forgot older events */
    " if(D.dropped>0){var xs=X(T[0]);mk('line',{x1:xs,x2:xs,y1:mt,y2:mt+ph,stroke:'#8a5300','stroke-width':1.2},svg);"
    "txt(svg,xs+4,mt+ph-6,'ring starts here ('+D.dropped.toLocaleString('en-US')+' older events dropped)',{fill:'#8a5300','font-size':11});}\n"
    /* the peak */
    " if(D.peak&&D.peak.t>=T[0]){var xp=X(D.peak.t),yp=Y(D.peak.bytes);mk('line',{x1:xp,x2:xp,y1:yp,y2:mt+ph,stroke:'#1d2330','stroke-width':1,'stroke-dasharray':'4 3'},svg);"
    "mk('circle',{cx:xp,cy:yp,r:4,fill:'#fff',stroke:'#1d2330','stroke-width':2},svg);"
    "var left=xp>ml+pw-160||(D.failure&&X(D.failure.t)>=xp&&X(D.failure.t)-xp<170);"
    "txt(svg,xp+(left?-9:9),Math.max(D.failure?mt+30:mt+12,yp-8),'peak '+fmtB(D.peak.bytes),{class:'halo','text-anchor':left?'end':'start','font-weight':600,fill:'#1d2330'});}\n"
    /* the failure: the request drawn on top of what was live */
    " if(D.failure){var xf=X(D.failure.t),y0=Y(D.failure.level),y1=Y(D.failure.level+D.failure.bytes);"
    "mk('line',{x1:xf,x2:xf,y1:mt,y2:mt+ph,stroke:'#c0392b','stroke-width':1.6},svg);"
    "mk('rect',{x:xf-7,y:Math.min(y0,y1),width:14,height:Math.max(1,Math.abs(y0-y1)),fill:'url(#hatch)',stroke:'#c0392b','stroke-width':1.4,'stroke-dasharray':'3 2'},svg);"
    "var fr=xf>ml+pw-190;txt(svg,fr?xf-12:xf+12,mt+12,'OOM: '+fmtB(D.failure.bytes)+' requested',{class:'halo','text-anchor':fr?'end':'start',fill:'#c0392b','font-weight':600});}\n"
    /* hover */
    " var guide=mk('line',{x1:0,x2:0,y1:mt,y2:mt+ph,stroke:'#1d2330','stroke-width':1,visibility:'hidden'},svg);\n"
    " var ov=mk('rect',{x:ml,y:mt,width:pw,height:ph,fill:'transparent'},svg);\n"
    " ov.addEventListener('mouseleave',function(){tip.style.display='none';guide.setAttribute('visibility','hidden');});\n"
    " ov.addEventListener('mousemove',function(ev){var r=svg.getBoundingClientRect(),px=(ev.clientX-r.left)*W/r.width,t=t0+(px-ml)/pw*(t1-t0),i=bsearch(t);\n"
    "  guide.setAttribute('x1',px);guide.setAttribute('x2',px);guide.setAttribute('visibility','visible');\n"
    "  var h='<div class=\"t\">'+fmtT(t,xd+2)+'</div>';if(i<0){h+='before the first kept event';}else{\n"
    "  h+='<b>'+fmtB(tot[i])+'</b> live'+(D.capacity?' ('+(100*tot[i]/D.capacity).toFixed(1)+'% of the device)':'')+'<br>';\n"
    "  for(var s=NSER-1;s>=0;s--){var v=S[s].v[i];if(v>0)h+='<span class=\"sw\" style=\"background:'+PAL[s]+'\"></span>'+esc(S[s].name)+': '+fmtB(v)+'<br>';}}\n"
    "  var near=(D.markers||[]).filter(function(m){return Math.abs(X(m.t)-px)<5;}).slice(0,4);near.forEach(function(m){h+='<span class=\"t\">marker '+fmtT(m.t,xd+2)+':</span> '+esc(m.label)+'<br>';});\n"
    "  tip.innerHTML=h;tip.style.display='block';var er=el.getBoundingClientRect(),lx=ev.clientX-er.left+14;if(lx+tip.offsetWidth>er.width)lx=ev.clientX-er.left-tip.offsetWidth-14;"
    "tip.style.left=Math.max(0,lx)+'px';tip.style.top=Math.max(0,ev.clientY-er.top-10)+'px';});\n"
    " el.insertBefore(svg,el.firstChild);el.setAttribute('data-drawn',String(drawn));\n"
    " var b=document.getElementById('scale');if(b){b.style.display=D.capacity?'':'none';b.textContent=fitCap?'Zoom to the data':'Show the device total';}\n"
    "}\n"
    "function esc(s){return String(s).replace(/[&<>\"']/g,function(c){return'&#'+c.charCodeAt(0)+';';});}\n"
    "var b=document.getElementById('scale');if(b)b.addEventListener('click',function(){fitCap=!fitCap;draw();});\n"
    "legend();draw();var rt=null;window.addEventListener('resize',function(){clearTimeout(rt);rt=setTimeout(draw,120);});\n"
    "})();\n";

/* Writes the JSON in buf compactly (no whitespace outside strings) with '<', '>' and '&' as \u escapes,
 * so that nothing in it can end the <script> element it sits in. */
static void put_json_for_script(FILE *f, const char *buf, size_t len)
{
    bool in_str = false, esc = false;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            continue;
        }
        if (c == '<')
            fputs("\\u003c", f);
        else if (c == '>')
            fputs("\\u003e", f);
        else if (c == '&')
            fputs("\\u0026", f);
        else
            putc_unlocked(c, f);
    }
}

static int64_t rel_us(const struct ot_snapshot *s, uint64_t t_ns)
{
    uint64_t b = s->meta.start_mono_ns;
    return t_ns >= b ? (int64_t)((t_ns - b) / 1000u) : -(int64_t)((b - t_ns) / 1000u);
}

/* The total level at time t (step-after), for the failure's bar. */
static uint64_t level_at(const struct ot_timeline *tl, uint64_t t)
{
    uint64_t lvl = 0;
    for (size_t p = 0; p < tl->npoints && tl->t_ns[p] <= t; p++) {
        lvl = 0;
        for (size_t k = 0; k < tl->nseries; k++)
            lvl = ot_sat_add(lvl, tl->v[p * tl->nseries + k]);
    }
    return lvl;
}

static int timeline_json(struct hx *h)
{
    const struct ot_snapshot *s = h->s;
    const struct ot_timeline *tl = &h->tl;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return -1;
    struct ot_json j;
    ot_json_init(&j, m);
    ot_json_obj(&j, NULL);
    ot_json_i64(&j, "device", tl->device);
    const struct snap_device *d = ot_snapshot_device(s, tl->device);
    ot_json_u64_or_null(&j, "capacity", d && (d->flags & OT_DEV_MEMINFO_KNOWN) && d->total_bytes, d ? d->total_bytes : 0);
    ot_json_u64(&j, "maxTotal", tl->max_total);
    ot_json_arr(&j, "palette");
    for (size_t i = 0; i < tl->nseries; i++)
        ot_json_cstr(&j, NULL, palette[i + 1 == tl->nseries ? OT_TL_TOP : i]);
    ot_json_arr_end(&j);
    ot_json_arr(&j, "t");
    for (size_t p = 0; p < tl->npoints; p++)
        ot_json_i64(&j, NULL, rel_us(s, tl->t_ns[p]));
    ot_json_arr_end(&j);
    /* Each site's bytes at the peak, for the legend, when the series come from the peak. */
    const struct ot_sites *pk = h->a->peak && h->a->peak->has_sites && h->a->peak->device == tl->device ? &h->a->peak->sites : NULL;
    ot_json_arr(&j, "series");
    for (size_t k = 0; k < tl->nseries; k++) {
        bool other = k + 1 == tl->nseries;
        ot_json_obj(&j, NULL);
        ot_json_cstr(&j, "name", other ? (tl->nseries > 1 ? "other sites" : "all sites") :
                                     (h->series_names ? h->series_names[k] : "?"));
        if (!other)
            ot_json_u64(&j, "stack_id", tl->stack_id[k]);
        bool known = false;
        uint64_t at_peak = 0;
        if (pk && !other) {
            for (size_t i = 0; i < pk->n && !known; i++)
                if (pk->v[i].stack_id == tl->stack_id[k]) {
                    known = true;
                    at_peak = pk->v[i].bytes;
                }
        } else if (pk) {
            /* "other": the peak's records of every site that is not a series. */
            known = true;
            for (size_t i = 0; i < pk->n; i++) {
                bool named = false;
                for (size_t q = 0; q + 1 < tl->nseries && !named; q++)
                    named = pk->v[i].stack_id == tl->stack_id[q];
                if (!named)
                    at_peak = ot_sat_add(at_peak, pk->v[i].bytes);
            }
        }
        ot_json_u64_or_null(&j, "peak", known, at_peak);
        ot_json_arr(&j, "v");
        for (size_t p = 0; p < tl->npoints; p++)
            ot_json_u64(&j, NULL, tl->v[p * tl->nseries + k]);
        ot_json_arr_end(&j);
        ot_json_obj_end(&j);
    }
    ot_json_arr_end(&j);
    const struct ot_peak_view *pv = NULL;
    for (size_t i = 0; i < h->a->npeaks; i++)
        if (h->a->peaks[i].device == tl->device)
            pv = &h->a->peaks[i];
    if (pv && pv->time_ns) {
        ot_json_obj(&j, "peak");
        ot_json_i64(&j, "t", rel_us(s, pv->time_ns));
        ot_json_u64(&j, "bytes", pv->bytes);
        ot_json_obj_end(&j);
    } else {
        ot_json_null(&j, "peak");
    }
    if (s->has_failure && s->failure.device == tl->device) {
        ot_json_obj(&j, "failure");
        ot_json_i64(&j, "t", rel_us(s, s->failure.time_ns));
        ot_json_u64(&j, "bytes", s->failure.requested_bytes);
        ot_json_u64(&j, "level", level_at(tl, s->failure.time_ns));
        ot_json_obj_end(&j);
    } else {
        ot_json_null(&j, "failure");
    }
    ot_json_arr(&j, "markers");
    uint64_t lo = tl->npoints ? tl->t_ns[0] : 0, hi = tl->npoints ? tl->t_ns[tl->npoints - 1] : 0;
    size_t shown = 0;
    for (size_t i = 0; i < s->nmarkers && shown < H_MARKERS_TIMELINE; i++) {
        const struct snap_marker *mk = &s->markers[i];
        if (mk->time_ns < lo || mk->time_ns > hi)
            continue;
        ot_json_obj(&j, NULL);
        ot_json_i64(&j, "t", rel_us(s, mk->time_ns));
        ot_json_str(&j, "label", mk->label.p ? mk->label : ot_cstr(""));
        ot_json_obj_end(&j);
        shown++;
    }
    ot_json_arr_end(&j);
    ot_json_u64(&j, "dropped", s->meta.events_dropped);
    ot_json_obj_end(&j);
    if (fclose(m) != 0 || !buf) {
        free(buf);
        return -1;
    }
    fputs("<script type=\"application/json\" id=\"oomtrace-data\">", h->f);
    put_json_for_script(h->f, buf, len);
    fputs("</script>\n", h->f);
    free(buf);
    return 0;
}

/* One frame as an HTML list item. */
static void frame_li(struct hx *h, const struct ot_frame *fr)
{
    FILE *f = h->f;
    if (fr->kind == OT_FRAME_PY) {
        fputs("<li class=\"py\"><b>", f);
        h_text(f, fr->function.p ? fr->function : ot_cstr("?"), 1024);
        fputs("</b> <span class=\"loc\">", f);
        h_text(f, fr->file.p ? fr->file : ot_cstr("?"), 1024);
        if (fr->has_line)
            fprintf(f, ":%" PRIu64, fr->line);
        fputs("</span></li>", f);
        return;
    }
    fputs(ot_frame_is_plumbing(fr) ? "<li class=\"dim\">" : "<li>", f);
    if (fr->function.p && fr->function.n) {
        h_text(f, fr->function, 2048);
        if (fr->has_offset && !fr->symbolized)
            fprintf(f, "+0x%" PRIx64, fr->offset);
    } else {
        fprintf(f, "0x%" PRIx64, fr->address);
    }
    fputs(" <span class=\"loc\">(", f);
    if (fr->symbolized && fr->file.p) {
        h_text(f, fr->file, 1024);
        if (fr->has_line)
            fprintf(f, ":%" PRIu64, fr->line);
    } else if (fr->module.p) {
        h_text(f, ot_lbl_basename(fr->module), 256);
        if (!fr->function.p && fr->has_module_offset)
            fprintf(f, "+0x%" PRIx64, fr->module_offset);
    } else {
        fputs("no module", f);
    }
    fputs(fr->inlined ? ") inlined</span></li>" : ")</span></li>", f);
}

static void stack_list(struct hx *h, uint64_t stack_id)
{
    FILE *f = h->f;
    const struct ot_stack *st = ot_snapshot_stack(h->s, stack_id);
    if (!st) {
        fprintf(f, "<p class=\"note\">Stack %" PRIu64 " is not in the snapshot's STACKS.</p>", stack_id);
        return;
    }
    fputs("<ol class=\"stack\" start=\"0\">", f);
    size_t shown = 0, total = 0;
    for (size_t i = 0; i < st->nframes; i++) {
        const struct ot_frame *fr;
        size_t n = ot_resolve(h->a->res, st->frames[i], &fr);
        for (size_t k = 0; k < n; k++, total++)
            if (shown < H_FRAMES_MAX) {
                frame_li(h, &fr[k]);
                shown++;
            }
    }
    fputs("</ol>", f);
    if (total > shown)
        fprintf(f, "<p class=\"note\">%zu more frames not shown.</p>", total - shown);
    if (st->flags & OT_STACK_TRUNCATED)
        fputs("<p class=\"note\">The tracer cut this stack at its maximum depth.</p>", f);
    fputs("<p class=\"note\">Innermost first; grey: CUDA runtime, allocator and interpreter frames.</p>", f);
}

static void header(struct hx *h)
{
    FILE *f = h->f;
    const struct ot_meta *m = &h->s->meta;
    static const char *const what[] = {
        [OT_TRIGGER_OOM] = "CUDA out of memory",
        [OT_TRIGGER_EXIT] = "snapshot at process exit",
        [OT_TRIGGER_SIGNAL] = "snapshot on a signal",
        [OT_TRIGGER_API] = "snapshot requested by oomtrace_dump()",
        [OT_TRIGGER_FLUSH] = "periodic flush",
    };
    const char *w = m->trigger >= 1 && m->trigger <= OT_TRIGGER_FLUSH ? what[m->trigger] : "snapshot (unknown trigger)";
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>oomtrace: ", f);
    h_cstr(f, w);
    fprintf(f, " (pid %" PRIu64 " on ", m->pid);
    h_text(f, m->host.n ? m->host : ot_cstr("?"), 128);
    fputs(")</title>\n<style>\n", f);
    fputs(css, f);
    for (size_t i = 0; i <= OT_TL_TOP; i++)
        fprintf(f, ".s%zu{background:%s}\n", i, palette[i]);
    fputs("</style>\n</head>\n<body>\n<header><h1>oomtrace: ", f);
    h_cstr(f, w);
    fputs("</h1><p class=\"sub\"><code>", f);
    struct ot_sb cmd = {0};
    for (size_t i = 0; i < m->argc && cmd.n < 400; i++) {
        if (i)
            ot_sb_cstr(&cmd, " ");
        ot_sb_str(&cmd, m->argv[i]);
    }
    h_text(f, cmd.n ? ot_sb_view(&cmd) : ot_cstr("(no command line)"), 400);
    ot_sb_free(&cmd);
    fprintf(f, "</code> &middot; pid %" PRIu64 " on ", m->pid);
    h_text(f, m->host.n ? m->host : ot_cstr("unknown host"), 128);
    if (m->rank >= 0) {
        fprintf(f, " &middot; rank %" PRId64, m->rank);
        if (m->world_size > 0)
            fprintf(f, " of %" PRId64, m->world_size);
    }
    char buf[64], tb[48];
    if (ot_fmt_wall(buf, m->wall_ns))
        fprintf(f, " &middot; %s", buf);
    fprintf(f, " (%s after the tracer started)", ot_fmt_reltime(tb, m->mono_ns, m->start_mono_ns));
    if (m->reason.n) {
        fputs(" &middot; reason: ", f);
        h_text(f, m->reason, 200);
    }
    if (!(h->s->file_flags & OT_FILE_COMPLETE))
        fputs(" &middot; <b>the process did not finish writing this snapshot</b>", f);
    fputs("</p></header>\n<main>\n", f);
}

static void label_of(struct hx *h, uint64_t stack_id)
{
    struct ot_site one = {.stack_id = stack_id};
    char **l = ot_lbl_sites(h->a, &one, 1, H_NAME_MAX);
    h_cstr(h->f, l ? l[0] : "?");
    ot_lbl_free(l, 1);
}

static void failure(struct hx *h)
{
    const struct ot_snapshot *s = h->s;
    FILE *f = h->f;
    if (!s->has_failure)
        return;
    const struct snap_failure *x = &s->failure;
    char b1[32], b2[32], b3[32], tb[48];
    const char *rn = ot_result_name(x->result_code);
    char dn[32];
    if (x->device < 0)
        snprintf(dn, sizeof(dn), "the host");
    else
        snprintf(dn, sizeof(dn), "device %" PRId64, x->device);
    fprintf(f, "<section class=\"card fail\"><h2>Failed request</h2><p class=\"big\"><b>%s</b> (%s bytes) by <code>%s</code> "
            "on %s, category %s, returned <code>",
            ot_fmt_bytes(b1, x->requested_bytes), ot_fmt_count(b2, x->requested_bytes), ot_api_name64(x->api), dn,
            ot_category_name64(x->category));
    if (rn)
        fprintf(f, "%s", rn);
    else
        fprintf(f, "CUresult %" PRIu64, x->result_code);
    fprintf(f, "</code> at %s (seq %" PRIu64 ", thread %" PRIu64 ").</p>",
            ot_fmt_reltime(tb, x->time_ns, s->meta.start_mono_ns), x->seq, x->tid);
    const struct snap_device *d = ot_snapshot_device(s, x->device);
    if (d && (d->flags & OT_DEV_MEMINFO_KNOWN)) {
        fprintf(f, "<p>The device had %s free of %s total (cuMemGetInfo at the snapshot)", ot_fmt_bytes(b1, d->free_bytes),
                ot_fmt_bytes(b2, d->total_bytes));
        if (x->requested_bytes > d->free_bytes)
            fprintf(f, ": <b>%s short</b>", ot_fmt_bytes(b3, x->requested_bytes - d->free_bytes));
        fputs(".</p>", f);
    }
    fputs("<details><summary>Allocated at <code>", f);
    label_of(h, x->stack_id);
    fputs("</code></summary>", f);
    stack_list(h, x->stack_id);
    fputs("</details></section>\n", f);
}

static void why(struct hx *h)
{
    const struct ot_why *w = h->a->why;
    if (!w || !w->n)
        return;
    fputs("<section class=\"card\"><h2>Why</h2><ul class=\"why\">", h->f);
    for (size_t i = 0; i < w->n; i++) {
        fputs("<li>", h->f);
        h_cstr(h->f, w->v[i].text ? w->v[i].text : "");
        fputs("</li>", h->f);
    }
    fputs("</ul></section>\n", h->f);
}

static void timeline_section(struct hx *h)
{
    FILE *f = h->f;
    const struct ot_snapshot *s = h->s;
    const struct ot_timeline *tl = &h->tl;
    char b1[32], b2[32], tb[48];
    fprintf(f, "<section class=\"card\"><div class=\"controls\"><button id=\"scale\" type=\"button\">Show the device total</button>"
            "</div><h2>Device memory over time<small>device %" PRId64, tl->device);
    const struct snap_device *d = ot_snapshot_device(s, tl->device);
    if (d && d->name.n) {
        fputs(": ", f);
        h_text(f, d->name, 80);
    }
    fputs("; live bytes of this process, stacked by call site</small></h2>\n", f);
    fputs("<div id=\"timeline\" data-drawn=\"0\"><div id=\"tip\"></div></div>\n<div class=\"legend\" id=\"legend\"></div>\n"
          "<noscript><p class=\"note\">The timeline is drawn by the page's script.</p></noscript>\n", f);
    fprintf(f, "<p class=\"note\">Replayed from the event ring: %s allocation and free events on this device",
            ot_fmt_count(b1, tl->events));
    if (tl->downsampled)
        fprintf(f, ", drawn as %zu points (each time slice keeps its lowest and highest level, so the peak is exact)",
                tl->npoints);
    fputs(". The level is anchored at the snapshot: ", f);
    fputs(tl->end_from_live ? "its live allocations (LIVE)" : "DEVICES tracked bytes (the snapshot has no LIVE section)", f);
    fputs(", minus what the kept events added after each moment. Hover for the breakdown.</p>\n", f);
    const struct ot_meta *m = &s->meta;
    if (m->events_dropped)
        fprintf(f, "<p class=\"note warn\">The ring dropped the oldest %s events (%s chunks) to stay in its budget: the "
                "timeline starts at the earliest kept event, %s; the level there is what was live then.</p>\n",
                ot_fmt_count(b1, m->events_dropped), ot_fmt_count(b2, m->chunks_dropped),
                ot_fmt_reltime(tb, tl->npoints ? tl->t_ns[0] : 0, m->start_mono_ns));
    if (!(s->seen & (1u << OT_SEC_EVENTS)) || !tl->events)
        fputs("<p class=\"note warn\">No allocation events of this device are in the ring: the timeline is flat at "
              "the snapshot's level.</p>\n", f);
    if (tl->unmatched_frees)
        fprintf(f, "<p class=\"note\">%s frees are of allocations made before the ring's first event; they are "
                "counted in \"other sites\".</p>\n", ot_fmt_count(b1, tl->unmatched_frees));
    if (tl->negative)
        fputs("<p class=\"note warn\">The events and the live set disagree (a level fell below zero and is drawn as "
              "zero): see the notes.</p>\n", f);
    timeline_json(h);
    fputs("</section>\n", f);
}

static void sites_section(struct hx *h)
{
    FILE *f = h->f;
    const struct ot_analysis *a = h->a;
    struct ot_moment mo;
    ot_lbl_moment(a, h->o->at, OT_AT_PEAK, &mo);
    char b1[32], b2[32], tb[48];
    fputs("<section class=\"card\"><h2>", f);
    if (!mo.sites) {
        fputs("Top call sites</h2><p>Unknown: the snapshot has neither a PEAK nor a LIVE section.</p></section>\n", f);
        return;
    }
    const struct ot_sites *st = mo.sites;
    if (mo.at == OT_AT_PEAK)
        fprintf(f, "Top call sites at the peak<small>device %" PRId64 ": %s at %s", mo.device, ot_fmt_bytes(b1, mo.whole),
                ot_fmt_reltime(tb, mo.time_ns, h->s->meta.start_mono_ns));
    else if (mo.at == OT_AT_FAILURE)
        fprintf(f, "Top call sites at the failure<small>device %" PRId64 ": %s live", mo.device, ot_fmt_bytes(b1, mo.whole));
    else
        fprintf(f, "Top call sites live at the snapshot<small>all devices: %s", ot_fmt_bytes(b1, mo.whole));
    fprintf(f, " in %s allocation%s</small></h2>\n", ot_fmt_count(b2, st->count), st->count == 1 ? "" : "s");
    if (mo.fell_back)
        fprintf(f, "<p class=\"note warn\">The snapshot does not record the live set at the %s: this is the live set at "
                "the snapshot.</p>\n", ot_lbl_at_name(h->o->at == OT_AT_DEFAULT ? OT_AT_PEAK : h->o->at));
    if (!st->n) {
        fputs("<p>No allocations.</p></section>\n", f);
        return;
    }
    size_t n = st->n < h->o->top ? st->n : h->o->top;
    char **labels = ot_lbl_sites(a, st->v, n, H_NAME_MAX);
    fputs("<table class=\"sites\"><thead><tr><th class=\"num\">#</th><th class=\"num\">Bytes</th><th class=\"num\">"
          "Allocations</th><th class=\"num\">Share</th><th>Where (click for the stack)</th></tr></thead><tbody>\n", f);
    uint64_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ot_site *x = &st->v[i];
        shown = ot_sat_add(shown, x->bytes);
        int series = -1;
        if (h->has_tl && (mo.at == OT_AT_LIVE || mo.device == h->tl.device))
            for (size_t k = 0; k + 1 < h->tl.nseries; k++)
                if (h->tl.stack_id[k] == x->stack_id)
                    series = (int)k;
        double share = mo.whole ? 100.0 * (double)x->bytes / (double)mo.whole : 0;
        fprintf(f, "<tr><td class=\"num\">%zu</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">",
                i + 1, ot_fmt_bytes(b1, x->bytes), ot_fmt_count(b2, x->count));
        if (mo.whole)
            fprintf(f, "%.1f%%<div class=\"bar\"><i style=\"width:%.1f%%\"></i></div>", share, share > 100 ? 100.0 : share);
        else
            fputs("&ndash;", f);
        fputs("</td><td><details><summary>", f);
        if (series >= 0)
            fprintf(f, "<span class=\"sw s%d\" title=\"its colour in the timeline\"></span>", series);
        fputs("<code>", f);
        h_cstr(f, labels ? labels[i] : "?");
        fprintf(f, "</code> <span class=\"note\">stack %" PRIu64 "</span></summary>", x->stack_id);
        stack_list(h, x->stack_id);
        fputs("</details></td></tr>\n", f);
    }
    if (st->n > n) {
        uint64_t rest = st->bytes >= shown ? st->bytes - shown : 0;
        fprintf(f, "<tr><td></td><td class=\"num\">%s</td><td></td><td class=\"num\">", ot_fmt_bytes(b1, rest));
        if (mo.whole)
            fprintf(f, "%.1f%%", 100.0 * (double)rest / (double)mo.whole);
        fprintf(f, "</td><td>%zu more site%s (--top)</td></tr>\n", st->n - n, st->n - n == 1 ? "" : "s");
    }
    fputs("</tbody></table></section>\n", f);
    ot_lbl_free(labels, n);
}

static void devices_section(struct hx *h)
{
    FILE *f = h->f;
    const struct ot_snapshot *s = h->s;
    char b[32], ub[80];
    fputs("<section class=\"card\"><h2>Devices<small>total and free: cuMemGetInfo at the snapshot; tracked: this "
          "process's live allocations counted by oomtrace</small></h2>\n", f);
    if (!s->ndevices) {
        fputs("<p>No DEVICES section.</p></section>\n", f);
        return;
    }
    fputs("<table><thead><tr><th>Device</th><th>Name</th><th class=\"num\">Total</th><th class=\"num\">Free</th>"
          "<th class=\"num\">Tracked</th><th class=\"num\">Peak</th><th class=\"num\">Baseline</th>"
          "<th class=\"num\">Other processes</th><th class=\"num\">Pools reserved</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < s->ndevices && i < 256; i++) {
        const struct snap_device *d = &s->devices[i];
        bool mi = d->flags & OT_DEV_MEMINFO_KNOWN, bl = d->flags & OT_DEV_BASELINE_KNOWN;
        fprintf(f, "<tr><td>%" PRId64 "</td><td>", d->ordinal);
        h_text(f, d->name.n ? d->name : ot_cstr("?"), 80);
        const char *uuid = ot_fmt_uuid(ub, d->uuid);
        if (uuid) {
            fputs(" <span class=\"note mono\">", f);
            h_cstr(f, uuid);
            fputs("</span>", f);
        }
        fprintf(f, "</td><td class=\"num\">%s</td>", mi ? ot_fmt_bytes(b, d->total_bytes) : "?");
        fprintf(f, "<td class=\"num\">%s</td>", mi ? ot_fmt_bytes(b, d->free_bytes) : "?");
        fprintf(f, "<td class=\"num\">%s</td>", ot_fmt_bytes(b, d->tracked_bytes));
        fprintf(f, "<td class=\"num\">%s</td>", ot_fmt_bytes(b, d->peak_bytes));
        fprintf(f, "<td class=\"num\">%s</td>", bl ? ot_fmt_bytes(b, d->baseline_used_bytes) : "?");
        size_t np = 0;
        uint64_t other = ot_other_process_bytes(s, d->ordinal, &np);
        if (np)
            fprintf(f, "<td class=\"num\">%s in %zu</td>", ot_fmt_bytes(b, other), np);
        else
            fputs("<td class=\"num\">&ndash;</td>", f);
        struct ot_pool_totals pt = ot_pools_of(s, d->ordinal);
        if (pt.count)
            fprintf(f, "<td class=\"num\">%s</td></tr>\n", ot_fmt_bytes(b, pt.reserved_bytes));
        else
            fputs("<td class=\"num\">&ndash;</td></tr>\n", f);
    }
    fputs("</tbody></table>", f);
    if (s->ndevices > 256)
        fprintf(f, "<p class=\"note\">%zu more devices.</p>", s->ndevices - 256);
    fprintf(f, "<p class=\"note\">Host pinned memory (never in device totals): %s.</p></section>\n",
            ot_fmt_bytes(b, h->a->host_pinned_bytes));
}

static void events_section(struct hx *h)
{
    FILE *f = h->f;
    const struct ot_snapshot *s = h->s;
    const struct ot_meta *m = &s->meta;
    const struct ot_event_stats *e = &h->a->ev;
    char b1[32], b2[32], b3[32], t1[48], t2[48];
    fprintf(f, "<section class=\"card\"><h2>Events and markers</h2><p>%s recorded, %s kept in the ring, %s dropped",
            ot_fmt_count(b1, m->events_recorded), ot_fmt_count(b2, m->events_kept), ot_fmt_count(b3, m->events_dropped));
    if (e->decoded) {
        static const char *const kinds[] = {"other", "alloc", "free", "failed", "marker", "map", "unmap"};
        fprintf(f, "; the ring holds seq %" PRIu64 "..%" PRIu64 ", %s..%s: ", e->first_seq, e->last_seq,
                ot_fmt_reltime(t1, e->first_time_ns, m->start_mono_ns), ot_fmt_reltime(t2, e->last_time_ns, m->start_mono_ns));
        for (int k = 1; k <= OT_EV_KIND_MAX; k++)
            fprintf(f, "%s%s %s", k > 1 ? ", " : "", kinds[k], ot_fmt_count(b1, e->by_kind[k]));
    }
    fputs(".</p>\n", f);
    if (s->nmarkers) {
        size_t first = s->nmarkers > H_MARKERS_LISTED ? s->nmarkers - H_MARKERS_LISTED : 0;
        fprintf(f, "<details%s><summary>%zu marker%s (oomtrace_mark)%s</summary><table><thead><tr><th class=\"num\">Seq</th>"
                "<th class=\"num\">Time</th><th class=\"num\">Thread</th><th>Label</th></tr></thead><tbody>\n",
                s->nmarkers <= 12 ? " open" : "", s->nmarkers, s->nmarkers == 1 ? "" : "s",
                first ? ", the latest shown" : "");
        for (size_t i = first; i < s->nmarkers; i++) {
            const struct snap_marker *mk = &s->markers[i];
            fprintf(f, "<tr><td class=\"num\">%" PRIu64 "</td><td class=\"num\">%s</td><td class=\"num\">%" PRIu64 "</td><td>",
                    mk->seq, ot_fmt_reltime(t1, mk->time_ns, m->start_mono_ns), mk->tid);
            h_text(f, mk->label, 512);
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table></details>\n", f);
    }
    fputs("</section>\n", f);
}

static void notes_section(struct hx *h)
{
    const struct ot_notes *n = &h->a->notes;
    FILE *f = h->f;
    if (n->n) {
        fputs("<section class=\"card\"><h2>Notes</h2><ul class=\"why\">", f);
        for (size_t i = 0; i < n->n; i++) {
            fputs("<li>", f);
            h_cstr(f, n->v[i]);
            fputs("</li>", f);
        }
        fputs("</ul></section>\n", f);
    }
    fputs("<footer>Written by oomtrace-read from ", f);
    h_cstr(f, h->o->path ? h->o->path : "?");
    fputs(". Sizes: KiB/MiB/GiB = 2<sup>10</sup>/2<sup>20</sup>/2<sup>30</sup> bytes; times: seconds since the tracer "
          "started (CLOCK_MONOTONIC).</footer>\n", f);
}

/* The device the timeline shows: the failing one, else the leading peak's, else the first listed. */
static int64_t timeline_device(const struct ot_analysis *a)
{
    if (a->s->has_failure && a->s->failure.device >= 0) /* -1: a failed host allocation */
        return a->s->failure.device;
    if (a->peak)
        return a->peak->device;
    return a->s->ndevices ? a->s->devices[0].ordinal : 0;
}

int ot_report_html(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    struct hx h = {.f = f, .a = a, .s = a->s, .o = o};
    int64_t dev = timeline_device(a);
    /* The series: the device's top sites at its peak, else at the failure, else live at the snapshot. */
    struct ot_sites own = {0};
    const struct ot_sites *top = NULL;
    for (size_t i = 0; i < a->npeaks && !top; i++)
        if (a->peaks[i].device == dev && a->peaks[i].has_sites)
            top = &a->peaks[i].sites;
    if (!top && a->has_at_failure && a->failure_device == dev)
        top = &a->at_failure;
    if (!top && a->s->has_live) {
        struct ot_site_filter flt = {.device = dev, .device_memory = true};
        if (ot_sites_build(a->s->live, a->s->nlive, &flt, &own) == 0)
            top = &own;
    }
    char err[OT_ERRBUF];
    if (ot_timeline_build(&h.tl, a, dev, top, H_POINTS, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s\n", err);
        ot_sites_free(&own);
        return -1;
    }
    h.has_tl = true;
    size_t nnamed = h.tl.nseries - 1;
    h.series_names = nnamed ? ot_lbl_sites(a, top->v, nnamed, H_NAME_MAX) : NULL;

    header(&h);
    failure(&h);
    timeline_section(&h);
    why(&h);
    sites_section(&h);
    devices_section(&h);
    events_section(&h);
    notes_section(&h);
    fputs("</main>\n<script>\n", f);
    fputs(script, f);
    fputs("</script>\n</body>\n</html>\n", f);

    ot_lbl_free(h.series_names, nnamed);
    ot_timeline_free(&h.tl);
    ot_sites_free(&own);
    ot_sb_free(&h.sb);
    return ferror(f) ? -1 : 0;
}
