"""The console shell: navigation, dashboard and sign-in, composing each app's console pages."""
