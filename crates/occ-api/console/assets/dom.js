// Small DOM helpers. Everything the console renders goes through `h`, which only ever sets text
// and attributes (never HTML), so values from the API cannot inject markup.

/**
 * Creates an element. `attrs`: `class`, `on<event>` listeners, `dataset`, properties for
 * `value`/`checked`/`disabled`/`readOnly`/`hidden`, and plain attributes otherwise (`true` → empty
 * attribute, `false`/`null`/`undefined` → omitted). Children: nodes, strings, numbers, arrays.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (['value', 'checked', 'disabled', 'readOnly', 'hidden', 'selected'].includes(key)) {
      el[key] = value;
    } else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let idCounter = 0;
/** A unique element id with a readable prefix. */
export function uid(prefix) {
  idCounter += 1;
  return `${prefix}-${idCounter}`;
}

/** A labelled form field: label, control, hint and an error slot bound with aria-describedby. */
export function field({ label, control, hint, pointer }) {
  const id = control.id || uid('field');
  control.id = id;
  const hintEl = hint ? h('p', { class: 'hint', id: `${id}-hint` }, hint) : null;
  const errorEl = h('p', { class: 'field-error', id: `${id}-error`, hidden: true });
  const describedBy = [hintEl && hintEl.id, errorEl.id].filter(Boolean).join(' ');
  control.setAttribute('aria-describedby', describedBy);
  const wrapper = h('div', { class: 'field', dataset: pointer ? { pointer } : undefined },
    h('label', { for: id }, label), hintEl, control, errorEl);
  return wrapper;
}

/** Shows (or clears, with `null`) the error of a field made by `field`. */
export function setFieldError(wrapper, message) {
  const control = wrapper.querySelector('input, select, textarea');
  const errorEl = wrapper.querySelector('.field-error');
  if (message) {
    errorEl.textContent = message;
    errorEl.hidden = false;
    control.setAttribute('aria-invalid', 'true');
  } else {
    errorEl.textContent = '';
    errorEl.hidden = true;
    control.removeAttribute('aria-invalid');
  }
}

/** Formats an API timestamp for people (local time). */
export function when(text) {
  if (!text) return '—';
  const d = new Date(text);
  return Number.isNaN(d.getTime()) ? text : d.toLocaleString();
}

/**
 * Asks for confirmation in a modal `<dialog>`; resolves true when confirmed. The confirm button
 * carries `confirmLabel`; Escape and Cancel resolve false. Focus returns to the opener.
 */
export function confirmDialog({ title, body, confirmLabel, danger }) {
  const opener = document.activeElement;
  return new Promise((resolve) => {
    const titleId = uid('dialog-title');
    const confirmButton = h('button', { type: 'submit', value: 'confirm', class: danger ? 'danger' : '' }, confirmLabel);
    const dialog = h('dialog', { 'aria-labelledby': titleId, class: 'confirm' },
      h('form', { method: 'dialog' },
        h('h2', { id: titleId }, title),
        h('p', {}, body),
        h('div', { class: 'actions' },
          confirmButton,
          h('button', { type: 'submit', value: 'cancel', class: 'secondary' }, 'Cancel'))));
    dialog.addEventListener('close', () => {
      dialog.remove();
      if (opener && opener.isConnected) opener.focus();
      resolve(dialog.returnValue === 'confirm');
    });
    document.body.append(dialog);
    dialog.showModal();
    confirmButton.focus();
  });
}
