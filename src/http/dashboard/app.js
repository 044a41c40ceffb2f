// The dashboard's only script, served as is (no build step). Progressive: every page works
// without it. It adds live refresh of the `#live` region (keeping what was typed in it),
// confirmation prompts on `form[data-confirm]`, reading an uploaded text file into a form's
// textarea, and drops a notice from the address once shown.
'use strict';

function scheduleRefresh() {
  const live = document.getElementById('live');
  const every = Number(live?.dataset.refreshMs ?? 0);
  if (!live || !every) return;
  setTimeout(async () => {
    if (document.hidden) return scheduleRefresh();
    try {
      const response = await fetch(location.href, { headers: { accept: 'text/html' }, credentials: 'same-origin' });
      if (response.ok && !response.redirected) {
        const next = new DOMParser().parseFromString(await response.text(), 'text/html').getElementById('live');
        const current = document.getElementById('live');
        // Do not swap under someone typing in a form inside the live region.
        if (next && current && !current.contains(document.activeElement)) {
          const typed = typedIn(current);
          current.replaceWith(next);
          typed.forEach(putBack);
          seenUpdate(next);
        }
      }
    } catch {
      // Server restarting or offline: try again on the next tick.
    }
    scheduleRefresh();
  }, every);
}

// The reply box sits outside the live region: once the refreshed thread shows newer
// messages, a reply written now answers those too (its `seen`, conversation-pages.ts).
function seenUpdate(region) {
  if (!region.dataset.seen) return;
  for (const field of document.querySelectorAll('form input[name=seen]')) {
    if (!region.contains(field)) field.value = region.dataset.seen;
  }
}

// What was typed into the live region's forms and not sent (an edited suggestion): a click
// outside the box, to read the thread, let the next refresh replace it with the server's text.
function typedIn(region) {
  const typed = [];
  for (const field of region.querySelectorAll('textarea, input[type=text]')) {
    if (field.value !== field.defaultValue && field.name && field.form) typed.push({ action: field.form.getAttribute('action'), name: field.name, value: field.value });
  }
  return typed;
}

/** Puts a typed value back into the same form (by its action) of the refreshed region, if it is still there. */
function putBack({ action, name, value }) {
  const form = [...document.querySelectorAll('#live form')].find((f) => f.getAttribute('action') === action);
  const field = form?.elements.namedItem(name);
  if (field instanceof HTMLTextAreaElement || field instanceof HTMLInputElement) field.value = value;
}

document.addEventListener('submit', (event) => {
  const form = event.target;
  if (form instanceof HTMLFormElement && form.dataset.confirm && !confirm(form.dataset.confirm)) event.preventDefault();
});

// A file's text as people save files: UTF-16 with a byte-order mark (Excel's "Unicode
// text"), UTF-8, or else Windows-1252 (Excel's "CSV" in Western European locales). The
// same rule as the server's (src/knowledge/text-encoding.ts); file.text() read all as UTF-8.
function decodeText(bytes) {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder('utf-16le').decode(bytes);
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder('utf-16be').decode(bytes);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return new TextDecoder('windows-1252').decode(bytes);
  }
}

// <input type="file" data-into="name-of-textarea">: the file's text goes into the textarea,
// so uploads post as ordinary form fields (no multipart parser on the server).
document.addEventListener('change', async (event) => {
  const input = event.target;
  if (!(input instanceof HTMLInputElement) || input.type !== 'file' || !input.dataset.into) return;
  const file = input.files?.[0];
  const target = input.form?.elements.namedItem(input.dataset.into);
  if (!file || !(target instanceof HTMLTextAreaElement)) return;
  target.value = decodeText(new Uint8Array(await file.arrayBuffer()));
  // data-name-into: the field that takes the file's name; data-title-into: the one that takes
  // it without its extension, as `aiq add-document` titles a file (handbook.md → handbook), so
  // that the same file saved from either place replaces one document instead of making two.
  // Neither overwrites what the user typed.
  const fill = (field, value) => {
    const element = field ? input.form?.elements.namedItem(field) : null;
    if (element instanceof HTMLInputElement && (element.type === 'hidden' || element.value === '' || element.value === element.defaultValue)) element.value = value;
  };
  fill(input.dataset.nameInto, file.name);
  fill(input.dataset.titleInto, file.name.replace(/\.[^.]+$/, '') || file.name);
});

// A form refused in place (its text kept) is answered at its POST address: the page's own
// address goes back in the bar, or the live refresh and a reload would ask the POST route.
function restoreAddress() {
  const own = document.querySelector('link[rel="canonical"]');
  if (own instanceof HTMLLinkElement && own.href !== location.href) history.replaceState(history.state, '', own.href);
}

// A notice belongs to the action that caused it: drop it from the address once shown, so a
// reload (or the live refresh) shows the page as it is, not a stale "pending again".
function forgetNotice() {
  const url = new URL(location.href);
  let changed = false;
  for (const name of ['notice', 'problem', 'sig', 'retried']) {
    if (url.searchParams.has(name)) {
      url.searchParams.delete(name);
      changed = true;
    }
  }
  if (changed) history.replaceState(history.state, '', url);
}

document.addEventListener('DOMContentLoaded', () => {
  restoreAddress();
  forgetNotice();
  scheduleRefresh();
});
