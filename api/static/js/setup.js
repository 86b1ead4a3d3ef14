// First use: the user id (it names whose memory the chats read and write), and an API key
// once the server has keys (it then answers 401 without one). Both stay in this browser.
import { $ } from "./dom.js";

async function needsKey(api) {
  try {
    await api.get("/v1/chats?limit=1&user_id=_");
    return false;
  } catch (err) {
    if (err.status === 401) return true;
    throw err;
  }
}

// Ask only when needed: no user id kept yet, or the chat list answered 401 (keys exist).
export async function setupIfNeeded(api, store, load) {
  if (!store.user) await openSetup(api, store);
  try {
    return await load();
  } catch (err) {
    if (err.status !== 401) throw err;
  }
  await openSetup(api, store, store.key ? "This key was refused." : "This jin needs an API key.");
  return load();
}

export function openSetup(api, store, message = "") {
  const dialog = $("#setup");
  $("#setup-user").value = store.user;
  $("#setup-key").value = store.key;
  if (store.key || message) $("#setup-key-label").hidden = false;
  showError(message);
  dialog.showModal();
  return new Promise((resolve) => {
    // Escape closes it only once a user id is kept.
    dialog.oncancel = (e) => { if (!store.user) e.preventDefault(); };
    dialog.onclose = () => resolve();
    $("#setup-form").onsubmit = async (e) => {
      e.preventDefault();
      localStorage.setItem("jin.user", $("#setup-user").value.trim());
      localStorage.setItem("jin.key", $("#setup-key").value.trim());
      if (await needsKey(api).catch(() => false)) {
        $("#setup-key-label").hidden = false;
        showError(store.key ? "This key was refused." : "This jin needs an API key.");
        return;
      }
      dialog.close();
    };
  });
}

function showError(text) {
  const node = $("#setup-error");
  node.textContent = text;
  node.hidden = !text;
}
